/* libsparsegpu from C99: every family through include/sparsegpu.h and the built libsparsegpu.so,
 * on small deterministic inputs, each result element checked against a naive double reference.
 * Prints one line per check and ends with "N passed, M failed"; exits 1 when M > 0. */
#include "sparsegpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (ok) passed++; else failed++;
}

static void check_status(sgpuStatus_t st, const char *what) {
    if (st != SGPU_STATUS_SUCCESS) {
        printf("FAIL %s: %s (%s)\n", what, sgpuGetStatusName(st), sgpuGetLastErrorMessage());
        failed++;
    } else {
        check(1, what);
    }
}

/* ---- deterministic data: multiples of 1/8 in [-2, 2), exact in f16, bf16, f32 and f64 ---- */
static uint32_t seed = 20240601u;
static double uniform(void) {
    seed = seed * 1664525u + 1013904223u;
    return (double)(seed >> 8) / 16777216.0;
}
static double value(void) { return (double)((int)(uniform() * 32.0) - 16) / 8.0; }

/* ---- IEEE binary16 <-> float (round to nearest even) ---- */
static uint16_t float_to_half(float f) {
    uint32_t x, sign, mant, h, rem, halfway;
    int e;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    mant = x & 0x7fffffu;
    if (((x >> 23) & 0xffu) == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    e = (int)((x >> 23) & 0xffu) - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half (or zero) */
        int shift = 14 - e;
        if (shift > 24) return (uint16_t)sign;
        mant |= 0x800000u;
        h = mant >> shift;
        rem = mant & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1);
    } else {
        h = ((uint32_t)e << 10) | (mant >> 13);
        rem = mant & 0x1fffu;
        halfway = 0x1000u;
    }
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}
static float half_to_float(uint16_t h) {
    unsigned e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float f = e == 0 ? ldexpf((float)mant, -24)
            : e == 31 ? (mant ? NAN : INFINITY)
            : ldexpf((float)(mant | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -f : f;
}

/* ---- bfloat16 <-> float (the high half of a float, rounded to nearest even; no NaN in these tests) ---- */
static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static float bf16_to_float(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ---- arrays of any value type, read and written as double ---- */
static size_t type_size(int vt) { return vt == SGPU_VALUE_TYPE_F64 ? 8 : vt == SGPU_VALUE_TYPE_F32 ? 4 : 2; }
static const char *type_name(int vt) {
    return vt == SGPU_VALUE_TYPE_F64 ? "f64" : vt == SGPU_VALUE_TYPE_F32 ? "f32" : vt == SGPU_VALUE_TYPE_BF16 ? "bf16"
                                                                                                              : "f16";
}
static double get(const void *p, int vt, size_t i) {
    if (vt == SGPU_VALUE_TYPE_F64) return ((const double *)p)[i];
    if (vt == SGPU_VALUE_TYPE_F32) return ((const float *)p)[i];
    if (vt == SGPU_VALUE_TYPE_BF16) return bf16_to_float(((const uint16_t *)p)[i]);
    return half_to_float(((const uint16_t *)p)[i]);
}
static void put(void *p, int vt, size_t i, double v) {
    if (vt == SGPU_VALUE_TYPE_F64) ((double *)p)[i] = v;
    else if (vt == SGPU_VALUE_TYPE_F32) ((float *)p)[i] = (float)v;
    else if (vt == SGPU_VALUE_TYPE_BF16) ((uint16_t *)p)[i] = float_to_bf16((float)v);
    else ((uint16_t *)p)[i] = float_to_half((float)v);
}
/* A typed array of n random values (n may be 0). */
static void *random_array(int vt, size_t n) {
    void *p = malloc((n ? n : 1) * type_size(vt));
    size_t i;
    for (i = 0; i < n; i++) put(p, vt, i, value());
    return p;
}
static double *as_doubles(const void *p, int vt, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof *d);
    size_t i;
    for (i = 0; i < n; i++) d[i] = get(p, vt, i);
    return d;
}
/* C is rounded to its type once: 2^-53, 2^-24, 2^-11 (f16), 2^-8 (bf16) relative, with headroom for the sums. */
static double tolerance(int vt) {
    return vt == SGPU_VALUE_TYPE_F64 ? 1e-12 : vt == SGPU_VALUE_TYPE_F32 ? 1e-5 : vt == SGPU_VALUE_TYPE_BF16 ? 1e-2 : 2e-3;
}

/* Compares every element of got (type vt) with want, relative to the largest |want|. */
static void check_array(const char *what, const void *got, int vt, const double *want, size_t n) {
    double scale = 1.0, tol = tolerance(vt);
    size_t i, bad = 0, first = 0;
    for (i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (i = 0; i < n; i++)
        if (!(fabs(get(got, vt, i) - want[i]) <= tol * scale) && !(isnan(want[i]) && isnan(get(got, vt, i)))) {
            if (!bad) first = i;
            bad++;
        }
    if (bad) {
        printf("FAIL %s: %lu of %lu elements differ, first [%lu]: got %.9g want %.9g\n", what, (unsigned long)bad,
               (unsigned long)n, (unsigned long)first, get(got, vt, first), want[first]);
        failed++;
    } else {
        printf("PASS %s (%lu elements)\n", what, (unsigned long)n);
        passed++;
    }
}

/* alpha / beta as the value type asks: double for f64, float otherwise (f16 and bf16 included). */
typedef struct { float f; double d; } Scalar;
static const void *scalar(Scalar *s, int vt, double v) {
    s->f = (float)v;
    s->d = v;
    return vt == SGPU_VALUE_TYPE_F64 ? (const void *)&s->d : (const void *)&s->f;
}

static size_t at(int layout, int i, int j, int ld) {
    return layout == SGPU_LAYOUT_ROW_MAJOR ? (size_t)i * (size_t)ld + (size_t)j : (size_t)j * (size_t)ld + (size_t)i;
}

/* ---- a random CSR matrix (zero-based; odd rows list their columns in descending order) ---- */
typedef struct { int rows, cols; int64_t nnz; int *ptr, *ind; double *val; } Csr;

static Csr random_csr(int rows, int cols, double density) {
    Csr a;
    int i, j;
    a.rows = rows; a.cols = cols; a.nnz = 0;
    a.ptr = malloc((size_t)(rows + 1) * sizeof(int));
    a.ind = malloc(((size_t)rows * (size_t)cols + 1) * sizeof(int));
    a.val = malloc(((size_t)rows * (size_t)cols + 1) * sizeof(double));
    a.ptr[0] = 0;
    for (i = 0; i < rows; i++) {
        for (j = 0; j < cols; j++) {
            int c = (i % 2) ? cols - 1 - j : j;
            if (uniform() < density) { a.ind[a.nnz] = c; a.val[a.nnz] = value(); a.nnz++; }
        }
        a.ptr[i + 1] = (int)a.nnz;
    }
    return a;
}
static void free_csr(Csr *a) { free(a->ptr); free(a->ind); free(a->val); }

/* Values of a as type vt; a->val is replaced by what the library will see (rounded to vt). */
static void *csr_values(Csr *a, int vt) {
    void *p = malloc((size_t)(a->nnz ? a->nnz : 1) * type_size(vt));
    int64_t e;
    for (e = 0; e < a->nnz; e++) { put(p, vt, (size_t)e, a->val[e]); a->val[e] = get(p, vt, (size_t)e); }
    return p;
}

/* ================================ common ================================ */
static void test_common(void) {
    int version = -1;
    const char *msg;
    check_status(sgpuGetVersion(&version), "sgpuGetVersion succeeds");
    check(version == SGPU_VERSION, "sgpuGetVersion equals SGPU_VERSION");
    check(strcmp(sgpuGetStatusName(SGPU_STATUS_INVALID_SIZE), "SGPU_STATUS_INVALID_SIZE") == 0,
          "sgpuGetStatusName(SGPU_STATUS_INVALID_SIZE)");
    check(strcmp(sgpuGetStatusName(12345), "SGPU_STATUS_UNKNOWN") == 0, "sgpuGetStatusName of an unknown number");
    check(strlen(sgpuGetStatusString(SGPU_STATUS_INVALID_VALUE)) > 0, "sgpuGetStatusString is non-empty");
    check(sgpuGetVersion(NULL) == SGPU_STATUS_INVALID_POINTER, "sgpuGetVersion(NULL) is INVALID_POINTER");
    msg = sgpuGetLastErrorMessage();
    check(msg && strstr(msg, "sgpuGetVersion") != NULL, "last error message names sgpuGetVersion");
}

/* ================================ SMaT ================================ */
static void test_smat_type(smatHandle_t h, int vt, int base) {
    char what[160];
    Csr a = random_csr(37, 29, 0.2);
    void *vals = csr_values(&a, vt);
    smatMatrix_t A = NULL;
    smatMatrixInfo_t info;
    int layout, i, j, e;
    for (i = 0; i <= a.rows; i++) a.ptr[i] += base; /* shifted for the call, shifted back after */
    for (e = 0; e < a.nnz; e++) a.ind[e] += base;
    sprintf(what, "smatCreateCsr %s base %d (%dx%d, nnz %ld)", type_name(vt), base, a.rows, a.cols, (long)a.nnz);
    check_status(smatCreateCsr(h, &A, a.rows, a.cols, a.nnz, a.ptr, a.ind, vals, vt, base), what);
    free(vals);
    for (i = 0; i <= a.rows; i++) a.ptr[i] -= base;
    for (e = 0; e < a.nnz; e++) a.ind[e] -= base;
    check_status(smatGetMatrixInfo(A, &info), "smatGetMatrixInfo");
    sprintf(what, "smatGetMatrixInfo %s: rows %d cols %d nnz %ld blocks %ld", type_name(vt), info.rows, info.cols,
            (long)info.nnz, (long)info.blockCount);
    check(info.rows == a.rows && info.cols == a.cols && info.nnz == a.nnz && info.valueType == vt &&
              info.rowsInTiles + info.rowsInCsr == a.rows && info.entriesInCsr <= a.nnz &&
              (info.blockCount > 0) == (info.rowsInTiles > 0) && (info.blockCount > 0) == (info.fillRatio > 0.0) &&
              info.fillRatio <= 1.0 && info.bytes > 0 && info.csrBytes > 0,
          what);
    for (layout = SGPU_LAYOUT_ROW_MAJOR; layout <= SGPU_LAYOUT_COL_MAJOR; layout++) {
        int row = layout == SGPU_LAYOUT_ROW_MAJOR, n = 11;
        int ldb = row ? n + 3 : a.cols + 2, ldc = row ? n + 1 : a.rows + 5;
        size_t bsize = (size_t)(row ? a.cols : n) * (size_t)ldb, csize = (size_t)(row ? a.rows : n) * (size_t)ldc;
        void *B = random_array(vt, bsize), *C = random_array(vt, csize);
        double *want = as_doubles(C, vt, csize); /* padding must stay as it was */
        Scalar sa, sb;
        for (i = 0; i < a.rows; i++)
            for (j = 0; j < n; j++) {
                double sum = 0.0;
                for (e = a.ptr[i]; e < a.ptr[i + 1]; e++) sum += a.val[e] * get(B, vt, at(layout, a.ind[e], j, ldb));
                want[at(layout, i, j, ldc)] = 1.5 * sum - 0.5 * want[at(layout, i, j, ldc)];
            }
        sprintf(what, "smatSpMM %s %s-major", type_name(vt), row ? "row" : "col");
        check_status(smatSpMM(h, A, n, scalar(&sa, vt, 1.5), B, ldb, scalar(&sb, vt, -0.5), C, ldc, layout), what);
        check_array(what, C, vt, want, csize);
        free(B); free(C); free(want);
    }
    check_status(smatDestroyMatrix(A), "smatDestroyMatrix");
    free_csr(&a);
}

static void test_smat(void) {
    smatHandle_t h = NULL;
    smatReorderMode_t mode = -1;
    double tau = 0.0;
    smatFormat_t format = -1;
    check_status(smatCreate(&h), "smatCreate");
    test_smat_type(h, SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ZERO);
    /* Every block row as tiles from here on: the tile path runs whatever the matrix. */
    check_status(smatSetFormat(h, SMAT_FORMAT_TILES), "smatSetFormat TILES");
    check(smatGetFormat(h, &format) == 0 && format == SMAT_FORMAT_TILES, "smatGetFormat");
    test_smat_type(h, SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ONE);
    check_status(smatSetReorderMode(h, SMAT_REORDER_MODE_ALWAYS), "smatSetReorderMode ALWAYS");
    check_status(smatSetJaccardThreshold(h, 0.7), "smatSetJaccardThreshold 0.7");
    check(smatGetReorderMode(h, &mode) == 0 && mode == SMAT_REORDER_MODE_ALWAYS, "smatGetReorderMode");
    check(smatGetJaccardThreshold(h, &tau) == 0 && tau == 0.7, "smatGetJaccardThreshold");
    test_smat_type(h, SGPU_VALUE_TYPE_F32, SGPU_INDEX_BASE_ONE);
    /* f32 tiles in 3xTF32 on tensor cores (FMA on the CPU backend's split parts). */
    smatMathMode_t math = -1;
    check_status(smatSetMathMode(h, SMAT_MATH_MODE_TF32X3), "smatSetMathMode TF32X3");
    check(smatGetMathMode(h, &math) == 0 && math == SMAT_MATH_MODE_TF32X3, "smatGetMathMode");
    test_smat_type(h, SGPU_VALUE_TYPE_F32, SGPU_INDEX_BASE_ZERO);
    check(smatSetMathMode(h, 7) == SGPU_STATUS_INVALID_VALUE, "smatSetMathMode rejects 7");
    test_smat_type(h, SGPU_VALUE_TYPE_F16, SGPU_INDEX_BASE_ZERO);
    check(smatSetJaccardThreshold(h, 1.5) == SGPU_STATUS_INVALID_VALUE && strlen(sgpuGetLastErrorMessage()) > 0,
          "smatSetJaccardThreshold(1.5) is INVALID_VALUE with a message");
    check(smatCreateCsr(h, NULL, 2, 2, 0, NULL, NULL, NULL, SGPU_VALUE_TYPE_F32, 0) == SGPU_STATUS_INVALID_POINTER,
          "smatCreateCsr with NULL output is INVALID_POINTER");
    check_status(smatDestroy(h), "smatDestroy");
}

/* ================================ MSREP ================================ */
/* The CPU backend accepts any device list (partitions are placed on it all the same); a CUDA handle
 * only the devices that exist, and every machine with a GPU has device 0. */
static const int devices[3] = {0, 1, 2};
static int device_count = 3;

/* A matrix of values vt; x, y, alpha and beta of its compute type ct (float for 16-bit values). */
static void test_msrep_format(msrepHandle_t h, int format, int vt, int parts, int base) {
    static const char *names[3] = {"CSR", "CSC", "COO"};
    const int ct = vt == SGPU_VALUE_TYPE_F64 ? vt : SGPU_VALUE_TYPE_F32;
    char what[160];
    Csr a = random_csr(45, 33, 0.12);
    void *vals, *x, *y;
    int *major = malloc((size_t)(a.nnz + 1) * sizeof(int)), *minor = malloc((size_t)(a.nnz + 1) * sizeof(int));
    int *ptr = malloc((size_t)(a.rows > a.cols ? a.rows : a.cols) * sizeof(int) + sizeof(int));
    double *v = malloc((size_t)(a.nnz + 1) * sizeof(double)), *want;
    msrepMatrix_t A = NULL;
    msrepPartitionInfo_t info;
    int i, p, count = -1, ok;
    int64_t e, sum = 0;
    Scalar sa, sb;
    if (format == SGPU_SPARSE_FORMAT_CSC) { /* transpose: columns become the major dimension */
        int *next = calloc((size_t)a.cols + 1, sizeof(int));
        for (e = 0; e < a.nnz; e++) next[a.ind[e] + 1]++;
        for (i = 0; i < a.cols; i++) next[i + 1] += next[i];
        memcpy(ptr, next, ((size_t)a.cols + 1) * sizeof(int));
        for (i = 0; i < a.rows; i++)
            for (e = a.ptr[i]; e < a.ptr[i + 1]; e++) { int k = next[a.ind[e]]++; minor[k] = i; v[k] = a.val[e]; }
        free(next);
    } else {
        memcpy(ptr, a.ptr, ((size_t)a.rows + 1) * sizeof(int));
        for (i = 0; i < a.rows; i++)
            for (e = a.ptr[i]; e < a.ptr[i + 1]; e++) { major[e] = i; minor[e] = a.ind[e]; v[e] = a.val[e]; }
    }
    for (i = 0; i <= (format == SGPU_SPARSE_FORMAT_CSC ? a.cols : a.rows); i++) ptr[i] += base;
    for (e = 0; e < a.nnz; e++) { major[e] += base; minor[e] += base; }
    vals = malloc((size_t)(a.nnz + 1) * type_size(vt)); /* the values (k/8, |k| <= 16) are exact in every type */
    for (e = 0; e < a.nnz; e++) put(vals, vt, (size_t)e, v[e]);
    if (format == SGPU_SPARSE_FORMAT_CSR)
        ok = msrepCreateCsr(h, &A, a.rows, a.cols, a.nnz, ptr, minor, vals, vt, base, parts);
    else if (format == SGPU_SPARSE_FORMAT_CSC)
        ok = msrepCreateCsc(h, &A, a.rows, a.cols, a.nnz, ptr, minor, vals, vt, base, parts);
    else
        ok = msrepCreateCoo(h, &A, a.rows, a.cols, a.nnz, major, minor, vals, vt, base, parts);
    sprintf(what, "msrepCreate%s %s base %d, %d partitions (nnz %ld)", names[format], type_name(vt), base, parts,
            (long)a.nnz);
    check_status(ok, what);
    check_status(msrepGetPartitionCount(A, &count), "msrepGetPartitionCount");
    check(count == (parts ? parts : device_count), "partition count is as asked (0 = one per device)");
    ok = 1;
    for (p = 0; p < count; p++) {
        ok &= msrepGetPartitionInfo(A, p, &info) == 0;
        ok &= info.format == format && info.nnz == info.endIdx - info.startIdx && info.device == devices[p % device_count];
        ok &= info.startIdx == a.nnz * p / count && info.endIdx == a.nnz * (p + 1) / count;
        sum += info.nnz;
    }
    sprintf(what, "msrepGetPartitionInfo: contiguous ranges, round-robin devices, nnz sums to %ld", (long)a.nnz);
    check(ok && sum == a.nnz, what);
    x = random_array(ct, (size_t)a.cols);
    y = random_array(ct, (size_t)a.rows);
    want = as_doubles(y, ct, (size_t)a.rows);
    for (i = 0; i < a.rows; i++) {
        double s = 0.0;
        for (e = a.ptr[i]; e < a.ptr[i + 1]; e++) s += a.val[e] * get(x, ct, (size_t)a.ind[e]);
        want[i] = 2.0 * s + 0.75 * want[i];
    }
    sprintf(what, "msrepSpMV %s %s alpha 2 beta 0.75", names[format], type_name(vt));
    check_status(msrepSpMV(h, A, scalar(&sa, ct, 2.0), x, scalar(&sb, ct, 0.75), y), what);
    check_array(what, y, ct, want, (size_t)a.rows);
    check_status(msrepDestroyMatrix(A), "msrepDestroyMatrix");
    free(x); free(y); free(want); free(vals); free(v); free(major); free(minor); free(ptr);
    free_csr(&a);
}

static void test_msrep(void) {
    msrepHandle_t h = NULL;
    int got[3] = {-1, -1, -1}, count = 0;
    int backend = -1;
    check_status(msrepCreate(&h), "msrepCreate");
    check_status(msrepGetBackend(h, &backend), "msrepGetBackend");
    device_count = backend == SGPU_BACKEND_CPU ? 3 : 1;
    check_status(msrepSetDevices(h, device_count, devices), "msrepSetDevices");
    check(msrepGetDevices(h, 0, &count, NULL) == 0 && count == device_count &&
              msrepGetDevices(h, device_count, &count, got) == 0 && got[0] == 0 &&
              (device_count == 1 || (got[1] == 1 && got[2] == 2)),
          "msrepGetDevices: count query, then the ordinals");
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSR, SGPU_VALUE_TYPE_F64, 5, SGPU_INDEX_BASE_ZERO);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSR, SGPU_VALUE_TYPE_F32, 0, SGPU_INDEX_BASE_ONE);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSC, SGPU_VALUE_TYPE_F64, 4, SGPU_INDEX_BASE_ONE);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSC, SGPU_VALUE_TYPE_F32, 7, SGPU_INDEX_BASE_ZERO);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_COO, SGPU_VALUE_TYPE_F64, 3, SGPU_INDEX_BASE_ZERO);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_COO, SGPU_VALUE_TYPE_F32, 6, SGPU_INDEX_BASE_ONE);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSR, SGPU_VALUE_TYPE_F16, 2, SGPU_INDEX_BASE_ONE);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_CSC, SGPU_VALUE_TYPE_BF16, 3, SGPU_INDEX_BASE_ZERO);
    test_msrep_format(h, SGPU_SPARSE_FORMAT_COO, SGPU_VALUE_TYPE_F16, 0, SGPU_INDEX_BASE_ZERO);
    check(msrepSetDevices(h, 2, (const int[]){1, 1}) == SGPU_STATUS_INVALID_VALUE &&
              strlen(sgpuGetLastErrorMessage()) > 0,
          "msrepSetDevices with a repeated device is INVALID_VALUE with a message");
    check_status(msrepDestroy(h), "msrepDestroy");
}

/* ================================ SDDMM ================================ */
/* out[e] = alpha * S[e] * sum_p A[i][p] * B[j][p] on the pattern of s (zero-based), run with
 * sddmmDynamic (plan == NULL) or sddmmExecutePlan; `base` shifts the indices passed. */
static void run_sddmm(sddmmHandle_t h, sddmmPlan_t plan, const Csr *s, int base, int k, int vt, int layout,
                      int pattern_only, int want_algorithm, const char *label) {
    char what[200];
    int row = layout == SGPU_LAYOUT_ROW_MAJOR, lda = row ? k + 2 : s->rows + 3, ldb = row ? k + 1 : s->cols + 4;
    size_t asize = (size_t)(row ? s->rows : k) * (size_t)lda, bsize = (size_t)(row ? s->cols : k) * (size_t)ldb;
    void *A = random_array(vt, asize), *B = random_array(vt, bsize), *sv = random_array(vt, (size_t)s->nnz);
    void *out = random_array(vt, (size_t)s->nnz);
    double *want = malloc((size_t)(s->nnz + 1) * sizeof(double));
    int *ptr = malloc((size_t)(s->rows + 1) * sizeof(int)), *ind = malloc((size_t)(s->nnz + 1) * sizeof(int));
    int i, p, algorithm = -1;
    int64_t e;
    sgpuStatus_t st;
    Scalar sa;
    for (i = 0; i <= s->rows; i++) ptr[i] = s->ptr[i] + base;
    for (e = 0; e < s->nnz; e++) ind[e] = s->ind[e] + base;
    for (i = 0; i < s->rows; i++)
        for (e = s->ptr[i]; e < s->ptr[i + 1]; e++) {
            double dot = 0.0;
            for (p = 0; p < k; p++)
                dot += get(A, vt, at(layout, i, p, lda)) * get(B, vt, at(layout, s->ind[e], p, ldb));
            want[e] = -1.25 * (pattern_only ? 1.0 : get(sv, vt, (size_t)e)) * dot;
        }
    if (plan)
        st = sddmmExecutePlan(h, plan, k, scalar(&sa, vt, -1.25), A, lda, B, ldb, layout, pattern_only ? NULL : sv, vt,
                              out);
    else
        st = sddmmDynamic(h, s->rows, s->cols, k, scalar(&sa, vt, -1.25), A, lda, B, ldb, layout, s->nnz, ptr, ind,
                          pattern_only ? NULL : sv, base, vt, out);
    sprintf(what, "%s %s %s %s-major %dx%dx%d nnz %ld %s%s", plan ? "sddmmExecutePlan" : "sddmmDynamic", label,
            type_name(vt), row ? "row" : "col", s->rows, s->cols, k, (long)s->nnz,
            plan ? "planned" : base ? "base 1" : "base 0",
            pattern_only ? " (sValues NULL)" : "");
    check_status(st, what);
    check_array(what, out, vt, want, (size_t)s->nnz);
    check(sddmmGetLastAlgorithm(h, &algorithm) == 0 && algorithm == want_algorithm,
          want_algorithm == SDDMM_ALGORITHM_TILED ? "sddmmGetLastAlgorithm is TILED" : "sddmmGetLastAlgorithm is COO");
    free(A); free(B); free(sv); free(out); free(want); free(ptr); free(ind);
}

static void test_sddmm(void) {
    sddmmHandle_t h = NULL;
    sddmmPlan_t plan = NULL;
    sddmmAlgorithm_t algorithm = 0;
    sddmmMathMode_t math = -1;
    Csr dense = random_csr(70, 45, 0.3), sparse = random_csr(300, 200, 0.0);
    int e, *ptr1 = malloc((size_t)(dense.rows + 1) * sizeof(int)), *ind1 = malloc((size_t)dense.nnz * sizeof(int));
    /* three nonzeros in 300 x 200: density 5e-5 */
    sparse.nnz = 3;
    for (e = 0; e <= sparse.rows; e++) sparse.ptr[e] = e > 250 ? 3 : e > 100 ? 2 : e > 5 ? 1 : 0;
    sparse.ind[0] = 7; sparse.ind[1] = 199; sparse.ind[2] = 0;

    check_status(sddmmCreate(&h), "sddmmCreate");
    check(sddmmGetLastAlgorithm(h, &algorithm) == SGPU_STATUS_INVALID_VALUE,
          "sddmmGetLastAlgorithm before any product is INVALID_VALUE");
    run_sddmm(h, NULL, &dense, 0, 19, SGPU_VALUE_TYPE_F64, SGPU_LAYOUT_ROW_MAJOR, 0, SDDMM_ALGORITHM_COO,
              "AUTO dense-ish");
    run_sddmm(h, NULL, &sparse, 1, 13, SGPU_VALUE_TYPE_F32, SGPU_LAYOUT_COL_MAJOR, 0, SDDMM_ALGORITHM_COO,
              "AUTO very sparse");
    check_status(sddmmSetAlgorithm(h, SDDMM_ALGORITHM_COO), "sddmmSetAlgorithm COO");
    run_sddmm(h, NULL, &dense, 0, 70, SGPU_VALUE_TYPE_F32, SGPU_LAYOUT_COL_MAJOR, 0, SDDMM_ALGORITHM_COO, "forced COO");
    run_sddmm(h, NULL, &dense, 0, 9, SGPU_VALUE_TYPE_F16, SGPU_LAYOUT_ROW_MAJOR, 1, SDDMM_ALGORITHM_COO, "forced COO");
    check_status(sddmmSetAlgorithm(h, SDDMM_ALGORITHM_TILED), "sddmmSetAlgorithm TILED");
    run_sddmm(h, NULL, &sparse, 0, 5, SGPU_VALUE_TYPE_F64, SGPU_LAYOUT_COL_MAJOR, 0, SDDMM_ALGORITHM_TILED,
              "forced TILED");
    run_sddmm(h, NULL, &dense, 0, 70, SGPU_VALUE_TYPE_F32, SGPU_LAYOUT_ROW_MAJOR, 0, SDDMM_ALGORITHM_TILED,
              "forced TILED");
    /* f32 in 3xTF32: FP32-level accuracy on either backend. */
    check_status(sddmmSetMathMode(h, SDDMM_MATH_MODE_TF32X3), "sddmmSetMathMode TF32X3");
    check(sddmmGetMathMode(h, &math) == 0 && math == SDDMM_MATH_MODE_TF32X3, "sddmmGetMathMode");
    run_sddmm(h, NULL, &dense, 0, 70, SGPU_VALUE_TYPE_F32, SGPU_LAYOUT_ROW_MAJOR, 0, SDDMM_ALGORITHM_TILED,
              "forced TILED in 3xTF32");
    check(sddmmSetMathMode(h, 7) == SGPU_STATUS_INVALID_VALUE, "sddmmSetMathMode rejects 7");
    check_status(sddmmSetMathMode(h, SDDMM_MATH_MODE_DEFAULT), "sddmmSetMathMode DEFAULT");
    check_status(sddmmSetAlgorithm(h, SDDMM_ALGORITHM_AUTO), "sddmmSetAlgorithm AUTO");

    for (e = 0; e <= dense.rows; e++) ptr1[e] = dense.ptr[e] + 1;
    for (e = 0; e < dense.nnz; e++) ind1[e] = dense.ind[e] + 1;
    check_status(sddmmCreatePlan(h, &plan, dense.rows, dense.cols, dense.nnz, ptr1, ind1, SGPU_INDEX_BASE_ONE),
                 "sddmmCreatePlan (one-based pattern)");
    free(ptr1); free(ind1); /* the plan keeps its own copy */
    run_sddmm(h, plan, &dense, 0, 17, SGPU_VALUE_TYPE_F64, SGPU_LAYOUT_COL_MAJOR, 0, SDDMM_ALGORITHM_COO, "AUTO");
    run_sddmm(h, plan, &dense, 0, 8, SGPU_VALUE_TYPE_F16, SGPU_LAYOUT_ROW_MAJOR, 0, SDDMM_ALGORITHM_COO, "AUTO");
    check_status(sddmmSetAlgorithm(h, SDDMM_ALGORITHM_COO), "sddmmSetAlgorithm COO");
    run_sddmm(h, plan, &dense, 0, 23, SGPU_VALUE_TYPE_F32, SGPU_LAYOUT_ROW_MAJOR, 1, SDDMM_ALGORITHM_COO, "forced COO");
    check_status(sddmmDestroyPlan(plan), "sddmmDestroyPlan");

    check(sddmmDynamic(h, -1, 4, 4, NULL, NULL, 4, NULL, 4, 0, 0, NULL, NULL, NULL, 0, SGPU_VALUE_TYPE_F32, NULL) ==
                  SGPU_STATUS_INVALID_SIZE && strlen(sgpuGetLastErrorMessage()) > 0,
          "sddmmDynamic with m = -1 is INVALID_SIZE with a message");
    check_status(sddmmDestroy(h), "sddmmDestroy");
    free_csr(&dense); free_csr(&sparse);
}

/* ================================ SpAMM ================================ */
/* Naive SpAMM, column-major: C = alpha·op(A)·op(B) + beta·C where the product of block (ib, pb) of
 * op(A) and block (pb, jb) of op(B) (bs × bs blocks) is used only when their Frobenius norms
 * multiply to >= tau. Returns the number of block products performed. */
static long spamm_reference(int ta, int tb, int m, int n, int k, double alpha, const void *A, int lda, const void *B,
                            int ldb, double beta, double *C, int ldc, int vt, double tau, int bs) {
    int mb = (m + bs - 1) / bs, nb = (n + bs - 1) / bs, kb = (k + bs - 1) / bs, i, j, p;
    double *na = calloc((size_t)mb * (size_t)kb, sizeof(double));
    double *nb_ = calloc((size_t)kb * (size_t)nb, sizeof(double));
    long performed = 0;
#define OPA(i, p) get(A, vt, ta ? (size_t)(p) + (size_t)(i) * (size_t)lda : (size_t)(i) + (size_t)(p) * (size_t)lda)
#define OPB(p, j) get(B, vt, tb ? (size_t)(j) + (size_t)(p) * (size_t)ldb : (size_t)(p) + (size_t)(j) * (size_t)ldb)
    for (i = 0; i < m; i++)
        for (p = 0; p < k; p++) na[(i / bs) * kb + p / bs] += OPA(i, p) * OPA(i, p);
    for (p = 0; p < k; p++)
        for (j = 0; j < n; j++) nb_[(p / bs) * nb + j / bs] += OPB(p, j) * OPB(p, j);
    for (i = 0; i < mb * kb; i++) na[i] = sqrt(na[i]);
    for (i = 0; i < kb * nb; i++) nb_[i] = sqrt(nb_[i]);
    for (i = 0; i < mb; i++)
        for (j = 0; j < nb; j++)
            for (p = 0; p < kb; p++) performed += na[i * kb + p] * nb_[p * nb + j] >= tau;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            double sum = 0.0;
            for (p = 0; p < k; p++)
                if (na[(i / bs) * kb + p / bs] * nb_[(p / bs) * nb + j / bs] >= tau) sum += OPA(i, p) * OPB(p, j);
            double *c = &C[(size_t)i + (size_t)j * (size_t)ldc];
            *c = alpha * sum + (beta == 0.0 ? 0.0 : beta * *c);
        }
#undef OPA
#undef OPB
    free(na); free(nb_);
    return performed;
}

/* The typed entry point of the value type (spammDgemm, spammSgemm, spammHgemm), or spammGemmEx for
 * bf16, which has none. */
static sgpuStatus_t spamm_gemm(spammHandle_t h, int vt, int ta, int tb, int m, int n, int k, double alpha, const void *A,
                               int lda, const void *B, int ldb, double beta, void *C, int ldc, double tau) {
    Scalar sa, sb;
    if (vt == SGPU_VALUE_TYPE_F64)
        return spammDgemm(h, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb, scalar(&sb, vt, beta), C, ldc,
                          tau);
    if (vt == SGPU_VALUE_TYPE_F32)
        return spammSgemm(h, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb, scalar(&sb, vt, beta), C, ldc,
                          tau);
    if (vt == SGPU_VALUE_TYPE_F16)
        return spammHgemm(h, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb, scalar(&sb, vt, beta), C, ldc,
                          tau);
    return spammGemmEx(h, vt, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb, scalar(&sb, vt, beta), C, ldc,
                       tau);
}
static const char *spamm_gemm_name(int vt) {
    return vt == SGPU_VALUE_TYPE_F64 ? "spammDgemm" : vt == SGPU_VALUE_TYPE_F32 ? "spammSgemm"
                                                   : vt == SGPU_VALUE_TYPE_F16 ? "spammHgemm"
                                                                                : "spammGemmEx bf16";
}

/* Scales element (i, j) of a column-major array by 2^(-|i - j| / decay). */
static void decay_from_diagonal(void *p, int vt, int ld, int cols, double decay) {
    int i, j;
    for (j = 0; j < cols; j++)
        for (i = 0; i < ld; i++) {
            size_t at_ij = (size_t)i + (size_t)j * (size_t)ld;
            put(p, vt, at_ij, get(p, vt, at_ij) * pow(2.0, -abs(i - j) / decay));
        }
}

/* One spamm?gemm call with padded leading dimensions; `decay` > 0 makes op(A), op(B) decay away
 * from the diagonal (entries scaled by 2^(-|row - col| / decay)) so that τ > 0 skips products. */
static void run_spamm(spammHandle_t h, int vt, int ta, int tb, int m, int n, int k, double alpha, double beta,
                      double tau, double decay) {
    static const char *ops = "NT";
    char what[160];
    int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3, bs = 0, i, j;
    size_t asize = (size_t)lda * (size_t)(ta ? m : k), bsize = (size_t)ldb * (size_t)(tb ? k : n);
    size_t csize = (size_t)ldc * (size_t)n;
    void *A = random_array(vt, asize), *B = random_array(vt, bsize), *C = random_array(vt, csize);
    double *want, *exact, tuned = tau, ratio = 1.0, err = 0.0, bound, bound_tau = 0.0, achieved = 0.0;
    sgpuStatus_t st;
    spammStats_t stats;
    long performed;
    Scalar sa, sb;
    if (decay > 0.0) {
        decay_from_diagonal(A, vt, lda, ta ? m : k, decay);
        decay_from_diagonal(B, vt, ldb, tb ? k : n, decay);
        st = spammTuneTau(h, vt, ta, tb, m, n, k, A, lda, B, ldb, 0.5, 0.1, 40, &tuned, &ratio);
        sprintf(what, "spammTuneTau %s target 0.5: tau %.4g, valid ratio %.3f", type_name(vt), tuned, ratio);
        check(st == 0 && tuned > 0.0 && ratio > 0.0 && ratio < 1.0, what);
        if (st) printf("     %s\n", sgpuGetLastErrorMessage());
    }
    check_status(spammGetBlockSize(h, &bs), "spammGetBlockSize");
    if (beta == 0.0) /* beta = 0 never reads C */
        for (i = 0; (size_t)i < csize; i++) put(C, vt, (size_t)i, NAN);
    want = as_doubles(C, vt, csize);
    exact = as_doubles(C, vt, csize);
    performed = spamm_reference(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, want, ldc, vt, tuned, bs);
    st = spamm_gemm(h, vt, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tuned);
    sprintf(what, "%s %c%c %dx%dx%d block %d alpha %g beta %g tau %.4g", spamm_gemm_name(vt), ops[ta], ops[tb], m, n,
            k, bs, alpha, beta, tuned);
    check_status(st, what);
    check_array(what, C, vt, want, csize);
    check_status(spammGetStats(h, &stats), "spammGetStats");
    sprintf(what, "spammGetStats: %ld of %ld block products (reference %ld), tau %.4g, block %d",
            (long)stats.performedProducts, (long)stats.totalProducts, performed, stats.tau, stats.blockSize);
    check(stats.performedProducts == performed && stats.tau == tuned && stats.blockSize == bs &&
              stats.totalProducts == (long)((m + bs - 1) / bs) * ((n + bs - 1) / bs) * ((k + bs - 1) / bs) &&
              fabs(stats.validRatio - (double)performed / (double)stats.totalProducts) < 1e-12,
          what);
    if (tuned > 0.0) {
        /* ||C_exact - C||_F <= errorBound up to rounding: C_exact (the reference at tau = 0) is within the
         * bound of the reference at tau (want), which C equals up to its own rounding (large in bf16). */
        double rounding = 0.0;
        spamm_reference(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, exact, ldc, vt, 0.0, bs);
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                double got = get(C, vt, (size_t)i + (size_t)j * ldc);
                err += pow(exact[i + j * ldc] - got, 2.0);
                rounding += pow(want[i + j * ldc] - got, 2.0);
            }
        err = sqrt(err);
        rounding = sqrt(rounding);
        sprintf(what,
                "spammGetStats at tau > 0: valid ratio %.3f (tuned %.3f) < 1, error %.4g <= bound %.4g + rounding %.3g",
                stats.validRatio, ratio, err, stats.errorBound, rounding);
        check(stats.validRatio < 1.0 && stats.validRatio == ratio && err > 0.0 &&
                  err <= stats.errorBound * (1 + 1e-9) + rounding,
              what);
        /* The largest tau within the bound just reported skips at least as much, and its product
         * reports exactly the bound and ratio the search found. */
        bound = stats.errorBound;
        st = spammTuneTauForErrorBound(h, vt, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb, bound, 60,
                                       &bound_tau, &achieved, &ratio);
        sprintf(what, "spammTuneTauForErrorBound %.4g: tau %.4g >= %.4g, bound %.4g, valid ratio %.3f", bound,
                bound_tau, tuned, achieved, ratio);
        check(st == 0 && bound_tau >= tuned && achieved <= bound && ratio <= stats.validRatio, what);
        st = spamm_gemm(h, vt, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, bound_tau);
        check_status(st, "spamm?gemm at the tau for the error bound");
        check_status(spammGetStats(h, &stats), "spammGetStats");
        check(stats.errorBound == achieved && stats.validRatio == ratio,
              "spammGetStats after spammTuneTauForErrorBound reports its bound and ratio");
        /* The same search inside the product: the same tau, bound and ratio; with beta = 0 the same C. */
        {
            double *previous = as_doubles(C, vt, csize), within_tau = -1.0;
            st = spammGemmWithinErrorBound(h, vt, ta, tb, m, n, k, scalar(&sa, vt, alpha), A, lda, B, ldb,
                                           scalar(&sb, vt, beta), C, ldc, bound, 60, &within_tau);
            check_status(st, "spammGemmWithinErrorBound");
            check_status(spammGetStats(h, &stats), "spammGetStats");
            sprintf(what, "spammGemmWithinErrorBound %.4g: tau %.4g (search %.4g), bound %.4g, ratio %.3f", bound,
                    within_tau, bound_tau, stats.errorBound, stats.validRatio);
            check(within_tau == bound_tau && stats.tau == bound_tau && stats.errorBound == achieved &&
                      stats.validRatio == ratio,
                  what);
            if (beta == 0.0) check_array("spammGemmWithinErrorBound's C is spamm?gemm's at its tau", C, vt, previous,
                                         csize);
            free(previous);
        }
    }
    free(A); free(B); free(C); free(want); free(exact);
}

static void test_spamm(void) {
    spammHandle_t h = NULL;
    spammMathMode_t mode = -1;
    spammStats_t stats;
    int bs = 0;
    float one = 1.0f, c = 0.0f;
    check_status(spammCreate(&h), "spammCreate");
    check(spammGetBlockSize(h, &bs) == 0 && bs == 32, "spammGetBlockSize is 32 by default");
    check(spammGetStats(h, &stats) == SGPU_STATUS_INVALID_VALUE, "spammGetStats before any product is INVALID_VALUE");
    run_spamm(h, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_N, SGPU_OPERATION_N, 45, 38, 70, 1.5, -0.5, 0.0, 0.0);
    check_status(spammSetBlockSize(h, 8), "spammSetBlockSize 8");
    run_spamm(h, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_T, SGPU_OPERATION_T, 20, 33, 17, -2.0, 0.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_T, SGPU_OPERATION_N, 37, 29, 23, 0.75, 0.25, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_N, SGPU_OPERATION_T, 19, 41, 30, 1.0, 1.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F16, SGPU_OPERATION_N, SGPU_OPERATION_T, 21, 19, 26, 0.5, -1.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F16, SGPU_OPERATION_T, SGPU_OPERATION_N, 13, 22, 18, 1.0, 0.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_BF16, SGPU_OPERATION_T, SGPU_OPERATION_T, 23, 17, 29, -0.5, 2.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_BF16, SGPU_OPERATION_N, SGPU_OPERATION_N, 15, 26, 20, 1.0, 0.0, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_N, SGPU_OPERATION_N, 64, 60, 62, 1.25, 0.0, 0.0, 3.0);
    run_spamm(h, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_T, SGPU_OPERATION_N, 50, 64, 58, -1.0, 0.5, 0.0, 2.0);
    run_spamm(h, SGPU_VALUE_TYPE_BF16, SGPU_OPERATION_N, SGPU_OPERATION_T, 56, 48, 64, 0.75, -0.25, 0.0, 2.0);
    /* The FP32 math mode: DEFAULT until set, bad values rejected, 3xTF32 close to FP32. */
    check(spammGetMathMode(h, &mode) == 0 && mode == SPAMM_MATH_MODE_DEFAULT, "spammGetMathMode is DEFAULT by default");
    check(spammSetMathMode(h, 7) == SGPU_STATUS_INVALID_VALUE &&
              strstr(sgpuGetLastErrorMessage(), "spammSetMathMode") != NULL,
          "spammSetMathMode 7 is INVALID_VALUE, message names spammSetMathMode");
    check_status(spammSetMathMode(h, SPAMM_MATH_MODE_TF32X3), "spammSetMathMode TF32X3");
    check(spammGetMathMode(h, &mode) == 0 && mode == SPAMM_MATH_MODE_TF32X3, "spammGetMathMode is TF32X3 once set");
    check_status(spammSetBlockSize(h, 32), "spammSetBlockSize 32");
    run_spamm(h, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_N, SGPU_OPERATION_T, 45, 38, 70, 1.5, -0.5, 0.0, 0.0);
    run_spamm(h, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_T, SGPU_OPERATION_N, 70, 64, 66, 1.0, 0.0, 0.0, 2.0);
    check_status(spammSetMathMode(h, SPAMM_MATH_MODE_DEFAULT), "spammSetMathMode DEFAULT");
    check(spammSgemm(h, 0, 0, 1, 1, 1, &one, &one, 1, &one, 1, &one, NULL, 1, 0.0) == SGPU_STATUS_INVALID_POINTER &&
              strstr(sgpuGetLastErrorMessage(), "spammSgemm") != NULL,
          "spammSgemm with C NULL is INVALID_POINTER, message names spammSgemm");
    check(spammSgemm(h, 0, 0, 1, 1, 1, &one, &one, 1, &one, 1, &one, &c, 1, -1.0) == SGPU_STATUS_INVALID_VALUE,
          "spammSgemm with tau -1 is INVALID_VALUE");
    check_status(spammDestroy(h), "spammDestroy");
}

int main(void) {
    test_common();
    test_spamm();
    test_smat();
    test_msrep();
    test_sddmm();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/*
 * Conjugate gradients for the 2D Poisson equation, every matrix-vector product through msrepSpMV.
 *
 * A is the 5-point Laplacian of a GRID x GRID grid with Dirichlet boundaries (4 on the diagonal,
 * -1 for each neighbour): symmetric positive definite. The right-hand side is b = A x_true for a
 * known x_true, so the solution can be checked. The matrix is cut into PARTITIONS nnz-balanced
 * pCSR partitions (spread over the handle's devices; on the CPU backend they run in parallel).
 *
 * Prints the relative residual every 25 iterations; exits with 1 unless CG converges and the
 * solution matches x_true.
 *
 *   cc -std=c99 -O2 cg_msrep.c $(pkg-config --cflags --libs sparsegpu) -lm -o cg_msrep && ./cg_msrep
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sparsegpu.h"

#define GRID 64
#define PARTITIONS 4
#define TOLERANCE 1e-10 /* on ||r|| / ||b|| */

#define CHECK(call)                                                                            \
    do {                                                                                       \
        sgpuStatus_t status_ = (call);                                                         \
        if (status_ != SGPU_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s failed: %s\n", #call, sgpuGetLastErrorMessage());              \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double dot(int n, const double *x, const double *y) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

/* y = A x by a plain CSR loop, independent of the library: builds b and checks the final residual. */
static void csr_multiply(int n, const int *row_ptr, const int *col_ind, const double *values, const double *x,
                         double *y) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) s += values[e] * x[col_ind[e]];
        y[i] = s;
    }
}

int main(void) {
    const int n = GRID * GRID;
    int *row_ptr = malloc((n + 1) * sizeof *row_ptr);
    int *col_ind = malloc(5 * n * sizeof *col_ind);
    double *values = malloc(5 * n * sizeof *values);
    int nnz = 0;
    for (int gy = 0; gy < GRID; gy++) {
        for (int gx = 0; gx < GRID; gx++) {
            int i = gy * GRID + gx;
            row_ptr[i] = nnz;
            /* Columns in increasing order: below, left, centre, right, above. */
            if (gy > 0) { col_ind[nnz] = i - GRID; values[nnz++] = -1; }
            if (gx > 0) { col_ind[nnz] = i - 1; values[nnz++] = -1; }
            col_ind[nnz] = i; values[nnz++] = 4;
            if (gx < GRID - 1) { col_ind[nnz] = i + 1; values[nnz++] = -1; }
            if (gy < GRID - 1) { col_ind[nnz] = i + GRID; values[nnz++] = -1; }
        }
    }
    row_ptr[n] = nnz;

    double *x_true = malloc(n * sizeof *x_true), *b = malloc(n * sizeof *b);
    for (int i = 0; i < n; i++) x_true[i] = sin(0.37 * i) + 0.5 * cos(0.011 * i * i);
    csr_multiply(n, row_ptr, col_ind, values, x_true, b);

    msrepHandle_t handle;
    CHECK(msrepCreate(&handle));
    msrepMatrix_t A;
    CHECK(msrepCreateCsr(handle, &A, n, n, nnz, row_ptr, col_ind, values, SGPU_VALUE_TYPE_F64,
                         SGPU_INDEX_BASE_ZERO, PARTITIONS));
    printf("2D Laplacian %dx%d: %d unknowns, %d nonzeros in %d partitions\n", GRID, GRID, n, nnz, PARTITIONS);
    for (int p = 0; p < PARTITIONS; p++) {
        msrepPartitionInfo_t info;
        CHECK(msrepGetPartitionInfo(A, p, &info));
        printf("  partition %d: rows %lld..%lld, %lld nonzeros\n", p, (long long)info.startMajor,
               (long long)info.endMajor - 1, (long long)info.nnz);
    }

    double *x = calloc(n, sizeof *x), *r = malloc(n * sizeof *r), *p = malloc(n * sizeof *p);
    double *q = malloc(n * sizeof *q);
    for (int i = 0; i < n; i++) r[i] = p[i] = b[i]; /* x = 0, so r = b */
    const double b_norm = sqrt(dot(n, b, b)), one = 1, zero = 0;
    double rr = dot(n, r, r);
    int iterations = 0;
    printf("%6s %14s\n", "iter", "||r||/||b||");
    while (sqrt(rr) > TOLERANCE * b_norm && iterations < n) {
        CHECK(msrepSpMV(handle, A, &one, p, &zero, q)); /* q = A p */
        const double step = rr / dot(n, p, q);
        for (int i = 0; i < n; i++) {
            x[i] += step * p[i];
            r[i] -= step * q[i];
        }
        const double rr_next = dot(n, r, r);
        for (int i = 0; i < n; i++) p[i] = r[i] + (rr_next / rr) * p[i];
        rr = rr_next;
        iterations++;
        if (iterations % 25 == 0) printf("%6d %14.6e\n", iterations, sqrt(rr) / b_norm);
    }
    if (iterations % 25 != 0) printf("%6d %14.6e\n", iterations, sqrt(rr) / b_norm);

    /* The recurrence's r drifts from b - A x in floating point: check the true residual. */
    csr_multiply(n, row_ptr, col_ind, values, x, q);
    double residual = 0, error = 0, x_norm = 0;
    for (int i = 0; i < n; i++) {
        residual += (b[i] - q[i]) * (b[i] - q[i]);
        error += (x[i] - x_true[i]) * (x[i] - x_true[i]);
        x_norm += x_true[i] * x_true[i];
    }
    residual = sqrt(residual) / b_norm;
    error = sqrt(error / x_norm);
    printf("true residual ||b - Ax||/||b|| = %.3e, error ||x - x_true||/||x_true|| = %.3e\n", residual, error);

    /* The condition number of this Laplacian is about 1.7e3, so the error may be that much larger. */
    int failed = !(sqrt(rr) <= TOLERANCE * b_norm) || !(residual <= 10 * TOLERANCE) || !(error <= 1e-6);
    printf("%s\n", failed ? "FAILED" : "OK");

    CHECK(msrepDestroyMatrix(A));
    CHECK(msrepDestroy(handle));
    free(row_ptr); free(col_ind); free(values); free(x_true); free(b); free(x); free(r); free(p); free(q);
    return failed;
}

/*
 * Density-matrix purification (SP2) with every matrix product through SpAMM under an error budget.
 *
 * Reads the overlap matrix S and the Fock matrix F of a Hartree-Fock calculation (Matrix Market,
 * real symmetric, as ergo writes them) and the number of occupied orbitals, and computes the
 * density matrix D = 2 Z X Z^T without diagonalising F:
 *
 *   - Z = L^-T, the inverse Cholesky factor of S = L L^T, turns F into F_ortho = Z^T F Z in an
 *     orthonormal basis (computed densely here: it is done once, and is not what SpAMM is for);
 *   - X starts as (lmax I - F_ortho) / (lmax - lmin), with Gershgorin bounds lmin, lmax of the
 *     spectrum of F_ortho: eigenvalues in [0, 1], the occupied (lowest-energy) ones the largest;
 *   - each step replaces X by X^2 (moves the eigenvalues towards 0) or 2X - X^2 (towards 1),
 *     whichever brings trace(X) closer to the number of occupied orbitals, until X is idempotent:
 *     the projector onto the occupied orbitals.
 *
 * Every X^2 is spammGemmWithinErrorBound: the largest tau whose error bound, reported by
 * spammGetStats, stays within BUDGET. Per step it prints the idempotency error ||X^2 - X||_F,
 * trace(X), the tau and the share of block products performed, and the sum of the bounds reported
 * so far: the approximation spent, not a bound on the error of D (later steps damp or amplify the
 * errors of earlier ones).
 *
 * With a reference density matrix (D.mtx, e.g. the one the SCF program computed from the same F)
 * the result is compared with it. Exits with 1 when the purification does not converge or the
 * result does not match.
 *
 *   cc -std=c99 -O2 sp2_purification.c $(pkg-config --cflags --libs sparsegpu) -lm -o sp2_purification
 *   ./sp2_purification S.mtx F.mtx OCCUPIED [D.mtx]
 *
 * The files are read as plain text: decompress the gzip files of examples/data first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparsegpu.h"

#ifndef BUDGET              /* cc -DBUDGET=1e-6 ... tries another */
#define BUDGET 1e-7         /* bound on ||X^2_exact - X^2||_F per multiplication */
#endif
#define IDEMPOTENT 1e-6     /* ||X^2 - X||_F at which X counts as converged */
#define MAX_STEPS 100
#define BLOCK_SIZE 16       /* SpAMM skips products of BLOCK_SIZE x BLOCK_SIZE blocks */

#define CHECK(call)                                                                            \
    do {                                                                                       \
        sgpuStatus_t status_ = (call);                                                         \
        if (status_ != SGPU_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s failed: %s\n", #call, sgpuGetLastErrorMessage());              \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void fail(const char *path, const char *why) {
    fprintf(stderr, "%s: %s\n", path, why);
    exit(1);
}

/* A real symmetric Matrix Market file in coordinate format (one triangle stored) as a dense n x n
 * array; symmetric, so its row-major and column-major layouts are the same. */
static double *read_symmetric(const char *path, int *n) {
    FILE *file = fopen(path, "r");
    char line[1024];
    long entries;
    if (!file) fail(path, "cannot be opened");
    if (!fgets(line, sizeof line, file) || !strstr(line, "coordinate real symmetric"))
        fail(path, "not a real symmetric Matrix Market matrix in coordinate format");
    do {
        if (!fgets(line, sizeof line, file)) fail(path, "has no size line");
    } while (line[0] == '%');
    int cols;
    if (sscanf(line, "%d %d %ld", n, &cols, &entries) != 3 || *n != cols || *n < 1) fail(path, "bad size line");
    double *a = calloc((size_t)*n * *n, sizeof *a);
    for (long e = 0; e < entries; e++) {
        int i, j;
        double value;
        if (fscanf(file, "%d %d %lf", &i, &j, &value) != 3 || i < 1 || j < 1 || i > *n || j > *n)
            fail(path, "bad entry");
        a[(i - 1) + (size_t)(j - 1) * *n] = a[(j - 1) + (size_t)(i - 1) * *n] = value;
    }
    fclose(file);
    return a;
}

/* S = L L^T: L overwrites the lower triangle of the column-major s. */
static void cholesky(int n, double *s) {
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < j; k++)
            for (int i = j; i < n; i++) s[i + j * n] -= s[i + k * n] * s[j + k * n];
        if (!(s[j + j * n] > 0)) fail("S", "is not positive definite");
        const double pivot = sqrt(s[j + j * n]);
        for (int i = j; i < n; i++) s[i + j * n] /= pivot;
    }
}

/* B = L^-1 B (transposed = 0) or L^-T B (transposed = 1), column by column, for the Cholesky factor
 * L in the lower triangle of l. */
static void triangular_solve(int n, const double *l, int transposed, double *b) {
    for (int c = 0; c < n; c++) {
        double *x = b + (size_t)c * n;
        if (!transposed) {
            for (int j = 0; j < n; j++) {
                x[j] /= l[j + j * n];
                for (int i = j + 1; i < n; i++) x[i] -= l[i + j * n] * x[j];
            }
        } else {
            for (int i = n - 1; i >= 0; i--) {
                for (int j = i + 1; j < n; j++) x[i] -= l[j + i * n] * x[j];
                x[i] /= l[i + i * n];
            }
        }
    }
}

static void transpose(int n, double *a) {
    for (int j = 0; j < n; j++)
        for (int i = j + 1; i < n; i++) {
            double t = a[i + j * n];
            a[i + j * n] = a[j + i * n];
            a[j + i * n] = t;
        }
}

/* A = M^-1 A M^-T with M = L (transposed = 0) or M = L^T (1), for symmetric A. */
static void congruence(int n, const double *l, int transposed, double *a) {
    triangular_solve(n, l, transposed, a); /* M^-1 A */
    transpose(n, a);                       /* A M^-T, A being symmetric */
    triangular_solve(n, l, transposed, a); /* M^-1 A M^-T */
}

static double trace(int n, const double *a) {
    double t = 0;
    for (int i = 0; i < n; i++) t += a[i + i * n];
    return t;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s S.mtx F.mtx OCCUPIED [D.mtx]\n", argv[0]);
        return 2;
    }
    int n, n_fock;
    char *end;
    const long occupied = strtol(argv[3], &end, 10);
    if (*end != '\0' || occupied < 1) fail(argv[3], "is not a number of occupied orbitals");
    double *l = read_symmetric(argv[1], &n);
    double *x = read_symmetric(argv[2], &n_fock);
    if (n_fock != n) fail(argv[2], "differs in size from S");

    /* X = F_ortho = Z^T F Z = L^-1 F L^-T. */
    cholesky(n, l);
    congruence(n, l, 0, x);

    double lmin = INFINITY, lmax = -INFINITY;
    for (int i = 0; i < n; i++) {
        double radius = 0;
        for (int j = 0; j < n; j++)
            if (j != i) radius += fabs(x[i + j * n]);
        lmin = fmin(lmin, x[i + i * n] - radius);
        lmax = fmax(lmax, x[i + i * n] + radius);
    }
    for (size_t e = 0; e < (size_t)n * n; e++) x[e] = -x[e] / (lmax - lmin);
    for (int i = 0; i < n; i++) x[i + i * n] += lmax / (lmax - lmin);
    printf("%d basis functions, %ld occupied orbitals, spectrum of F_ortho within [%.3f, %.3f]\n", n, occupied, lmin,
           lmax);

    spammHandle_t spamm;
    CHECK(spammCreate(&spamm));
    CHECK(spammSetBlockSize(spamm, BLOCK_SIZE));
    double *x2 = malloc((size_t)n * n * sizeof *x2), idempotency = INFINITY, total_bound = 0;
    const double one = 1, zero = 0;
    printf("%4s %14s %16s %10s %9s %13s\n", "step", "||X^2 - X||_F", "trace(X)", "tau", "products", "sum of bounds");
    for (int step = 0; step < MAX_STEPS; step++) {
        double tau;
        spammStats_t stats;
        CHECK(spammGemmWithinErrorBound(spamm, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_N, SGPU_OPERATION_N, n, n, n, &one,
                                        x, n, x, n, &zero, x2, n, BUDGET, 60, &tau));
        CHECK(spammGetStats(spamm, &stats));
        total_bound += stats.errorBound;
        idempotency = 0;
        for (size_t e = 0; e < (size_t)n * n; e++) idempotency += (x2[e] - x[e]) * (x2[e] - x[e]);
        idempotency = sqrt(idempotency);
        const double trace_x = trace(n, x), trace_x2 = trace(n, x2);
        printf("%4d %14.3e %16.10f %10.2e %8.1f%% %13.3e\n", step, idempotency, trace_x, tau,
               100 * stats.validRatio, total_bound);
        if (idempotency <= IDEMPOTENT) break;
        if (fabs(trace_x2 - occupied) < fabs(2 * trace_x - trace_x2 - occupied)) {
            memcpy(x, x2, (size_t)n * n * sizeof *x);
        } else {
            for (size_t e = 0; e < (size_t)n * n; e++) x[e] = 2 * x[e] - x2[e];
        }
    }
    int failed = 0;
    if (!(idempotency <= IDEMPOTENT)) {
        printf("FAILED: not idempotent after %d steps\n", MAX_STEPS);
        failed = 1;
    }
    /* An idempotent X has integer eigenvalues 0 and 1: its trace counts the occupied orbitals. */
    const double trace_error = fabs(trace(n, x) - occupied);
    if (!(trace_error <= 1e-6)) {
        printf("FAILED: trace(X) misses the occupation by %.3e\n", trace_error);
        failed = 1;
    }

    if (argc == 5) {
        /* D = 2 Z X Z^T = 2 L^-T X L^-1. */
        congruence(n, l, 1, x);
        int n_reference;
        double *reference = read_symmetric(argv[4], &n_reference), difference = 0, norm = 0;
        if (n_reference != n) fail(argv[4], "differs in size from S");
        for (size_t e = 0; e < (size_t)n * n; e++) {
            difference += (2 * x[e] - reference[e]) * (2 * x[e] - reference[e]);
            norm += reference[e] * reference[e];
        }
        const double relative = sqrt(difference / norm);
        printf("||D - D_reference||_F / ||D_reference||_F = %.3e\n", relative);
        /* Looser than the budget: a reference from a file has about ten significant digits and the
         * truncation of small elements its program applied. */
        if (!(relative <= 1e-6)) {
            printf("FAILED: D differs from the reference\n");
            failed = 1;
        }
        free(reference);
    }
    printf("%s\n", failed ? "FAILED" : "OK");
    CHECK(spammDestroy(spamm));
    free(l);
    free(x);
    free(x2);
    return failed;
}

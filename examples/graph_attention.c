/*
 * One graph-attention layer on a sparse graph: for every node i,
 *
 *     out_i = sum over the neighbours j of i of  softmax_j(<Q_i, K_j> / sqrt(D)) * V_j
 *
 * The scores at the graph's edges are an SDDMM (sddmmDynamic samples Q K^T at the adjacency
 * pattern), the softmax over each row's edges is done here, and the weighted sum of V is an SpMM
 * (smatSpMM with the attention weights as the sparse matrix). Single precision, as in training.
 *
 * The graph: NODES nodes, each with a self-loop and DEGREE random neighbours. The result is checked
 * against a dense reference in double precision computed here (all NODES x NODES scores, masked
 * by the adjacency); exits with 1 when they differ.
 *
 *   cc -std=c99 -O2 graph_attention.c $(pkg-config --cflags --libs sparsegpu) -lm -o graph_attention
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparsegpu.h"

#define NODES 2000
#define DEGREE 12 /* random neighbours per node, besides itself */
#define D 32      /* width of Q and K */
#define DV 16     /* width of V and of the output */

#define CHECK(call)                                                                            \
    do {                                                                                       \
        sgpuStatus_t status_ = (call);                                                         \
        if (status_ != SGPU_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s failed: %s\n", #call, sgpuGetLastErrorMessage());              \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* A fixed pseudo-random sequence, so every run checks the same layer. */
static unsigned long long rng_state = 20240611ULL;
static unsigned random_below(unsigned bound) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng_state >> 33) % bound;
}
static float random_uniform(void) { return (float)random_below(1u << 24) / (float)(1u << 23) - 1.0f; }

int main(void) {
    /* Adjacency as CSR with sorted columns: a dense row of flags keeps the neighbours distinct. */
    int *row_ptr = malloc((NODES + 1) * sizeof *row_ptr);
    int *col_ind = malloc((size_t)NODES * (DEGREE + 1) * sizeof *col_ind);
    unsigned char *is_neighbour = calloc(NODES, 1);
    int nnz = 0;
    for (int i = 0; i < NODES; i++) {
        row_ptr[i] = nnz;
        is_neighbour[i] = 1;
        for (int added = 0; added < DEGREE;) {
            unsigned j = random_below(NODES);
            if (!is_neighbour[j]) {
                is_neighbour[j] = 1;
                added++;
            }
        }
        for (int j = 0; j < NODES; j++) {
            if (is_neighbour[j]) col_ind[nnz++] = j;
            is_neighbour[j] = 0;
        }
    }
    row_ptr[NODES] = nnz;

    float *q = malloc(sizeof(float) * NODES * D), *k = malloc(sizeof(float) * NODES * D);
    float *v = malloc(sizeof(float) * NODES * DV);
    for (int i = 0; i < NODES * D; i++) {
        q[i] = random_uniform();
        k[i] = random_uniform();
    }
    for (int i = 0; i < NODES * DV; i++) v[i] = random_uniform();

    /* Scores: attention[e] = <Q_i, K_j> / sqrt(D) at every edge e = (i, j); row-major Q and K. */
    float *attention = malloc(sizeof(float) * nnz);
    const float scale = 1.0f / sqrtf((float)D);
    sddmmHandle_t sddmm;
    CHECK(sddmmCreate(&sddmm));
    CHECK(sddmmDynamic(sddmm, NODES, NODES, D, &scale, q, D, k, D, SGPU_LAYOUT_ROW_MAJOR, nnz, row_ptr, col_ind,
                       NULL, SGPU_INDEX_BASE_ZERO, SGPU_VALUE_TYPE_F32, attention));
    sddmmAlgorithm_t algorithm;
    CHECK(sddmmGetLastAlgorithm(sddmm, &algorithm));

    /* Softmax over each row's edges, shifted by the row's largest score so exp cannot overflow. */
    for (int i = 0; i < NODES; i++) {
        float largest = -INFINITY, sum = 0;
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) largest = fmaxf(largest, attention[e]);
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) sum += attention[e] = expf(attention[e] - largest);
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) attention[e] /= sum;
    }

    /* Aggregation: out = attention * V, the attention weights as a sparse NODES x NODES matrix. */
    smatHandle_t smat;
    CHECK(smatCreate(&smat));
    smatMatrix_t weights;
    CHECK(smatCreateCsr(smat, &weights, NODES, NODES, nnz, row_ptr, col_ind, attention, SGPU_VALUE_TYPE_F32,
                        SGPU_INDEX_BASE_ZERO));
    float *out = malloc(sizeof(float) * NODES * DV);
    const float one = 1, zero = 0;
    CHECK(smatSpMM(smat, weights, DV, &one, v, DV, &zero, out, DV, SGPU_LAYOUT_ROW_MAJOR));

    printf("graph: %d nodes, %d edges (self-loops included); Q, K %d wide, V %d wide\n", NODES, nnz, D, DV);
    printf("SDDMM algorithm: %s\n", algorithm == SDDMM_ALGORITHM_TILED ? "tiled" : "COO");

    /* Dense reference, row by row: every score, the non-edges masked out of the softmax. */
    double *scores = malloc(sizeof(double) * NODES), worst = 0, largest_output = 0;
    unsigned char *edge = calloc(NODES, 1);
    for (int i = 0; i < NODES; i++) {
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) edge[col_ind[e]] = 1;
        double largest = -INFINITY, sum = 0;
        for (int j = 0; j < NODES; j++) {
            double s = 0;
            for (int p = 0; p < D; p++) s += (double)q[i * D + p] * k[j * D + p];
            scores[j] = s / sqrt((double)D);
            if (edge[j]) largest = fmax(largest, scores[j]);
        }
        for (int j = 0; j < NODES; j++) sum += scores[j] = edge[j] ? exp(scores[j] - largest) : 0;
        for (int c = 0; c < DV; c++) {
            double expected = 0;
            for (int j = 0; j < NODES; j++) expected += scores[j] / sum * v[j * DV + c];
            worst = fmax(worst, fabs(out[i * DV + c] - expected));
            largest_output = fmax(largest_output, fabs(expected));
        }
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; e++) edge[col_ind[e]] = 0;
    }
    /* Single precision through scores, exp and a sum of 13 terms: a few units of 1e-7 per step. */
    int failed = !(worst <= 1e-5 * largest_output);
    printf("largest |out - dense reference| = %.3e (largest |out| %.3f)\n", worst, largest_output);
    printf("%s\n", failed ? "FAILED" : "OK");

    CHECK(smatDestroyMatrix(weights));
    CHECK(smatDestroy(smat));
    CHECK(sddmmDestroy(sddmm));
    free(row_ptr); free(col_ind); free(is_neighbour); free(q); free(k); free(v); free(attention); free(out);
    free(scores); free(edge);
    return failed;
}

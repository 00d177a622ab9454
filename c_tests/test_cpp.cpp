// libsparsegpu from C++17: the header compiled as C++, every family called through the built
// libsparsegpu.so with RAII-owned handles, each output element checked against a naive reference.
// Prints one line per check and ends with "N passed, M failed"; exits 1 when M > 0.
#include "sparsegpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    ++(ok ? passed : failed);
}

void expect_ok(sgpuStatus_t status, const std::string& what) {
    if (status == SGPU_STATUS_SUCCESS) return check(true, what);
    check(false, what + ": " + sgpuGetStatusName(status) + " (" + sgpuGetLastErrorMessage() + ")");
}

// Owns a library object and destroys it (checking the status) when it goes out of scope.
template <typename H, sgpuStatus_t (*Destroy)(H)>
class Owned {
public:
    Owned() = default;
    Owned(const Owned&) = delete;
    Owned& operator=(const Owned&) = delete;
    ~Owned() {
        if (h_) expect_ok(Destroy(h_), "destroy (RAII)");
    }
    H* out() { return &h_; }
    operator H() const { return h_; }

private:
    H h_ = nullptr;
};
using SmatHandle = Owned<smatHandle_t, smatDestroy>;
using SmatMatrix = Owned<smatMatrix_t, smatDestroyMatrix>;
using MsrepHandle = Owned<msrepHandle_t, msrepDestroy>;
using MsrepMatrix = Owned<msrepMatrix_t, msrepDestroyMatrix>;
using SddmmHandle = Owned<sddmmHandle_t, sddmmDestroy>;
using SddmmPlan = Owned<sddmmPlan_t, sddmmDestroyPlan>;
using SpammHandle = Owned<spammHandle_t, spammDestroy>;

// ---- value types: float, double and IEEE binary16 as uint16_t ----
using half = std::uint16_t;

half float_to_half(float f) {  // round to nearest even
    std::uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    std::uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xffu) == 0xffu) return half(sign | 0x7c00u | (mant ? 0x200u : 0u));
    const int e = int((x >> 23) & 0xffu) - 127 + 15;
    if (e >= 31) return half(sign | 0x7c00u);
    std::uint32_t h, rem, halfway;
    if (e <= 0) {
        const int shift = 14 - e;
        if (shift > 24) return half(sign);
        mant |= 0x800000u;
        h = mant >> shift, rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    } else {
        h = (std::uint32_t(e) << 10) | (mant >> 13), rem = mant & 0x1fffu, halfway = 0x1000u;
    }
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return half(sign | h);
}

float half_to_float(half h) {
    const unsigned e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    const float f = e == 0 ? std::ldexp(float(mant), -24)
                  : e == 31 ? (mant ? NAN : INFINITY)
                  : std::ldexp(float(mant | 0x400u), int(e) - 25);
    return (h & 0x8000u) ? -f : f;
}

template <typename T> double to_double(T v) {
    if constexpr (std::is_same_v<T, half>) return half_to_float(v);
    else return double(v);
}
template <typename T> T from_double(double v) {
    if constexpr (std::is_same_v<T, half>) return float_to_half(float(v));
    else return T(v);
}
template <typename T> constexpr sgpuValueType_t value_type = std::is_same_v<T, double>  ? SGPU_VALUE_TYPE_F64
                                                             : std::is_same_v<T, float> ? SGPU_VALUE_TYPE_F32
                                                                                        : SGPU_VALUE_TYPE_F16;
template <typename T> const char* type_name() {
    return std::is_same_v<T, double> ? "f64" : std::is_same_v<T, float> ? "f32" : "f16";
}
// alpha and beta: double for f64, float for f32 and f16.
template <typename T> using Scalar = std::conditional_t<std::is_same_v<T, double>, double, float>;

std::mt19937 rng(20240601u);
double value() { return std::uniform_int_distribution<int>(-16, 15)(rng) / 8.0; }  // exact in f16
template <typename T> std::vector<T> random_vector(std::size_t n) {
    std::vector<T> v(n);
    for (auto& x : v) x = from_double<T>(value());
    return v;
}
template <typename T> std::vector<double> doubles(const std::vector<T>& v) {
    std::vector<double> d(v.size());
    std::transform(v.begin(), v.end(), d.begin(), to_double<T>);
    return d;
}

// Every element of got against want, relative to the largest |want|.
template <typename T>
void check_all(const std::string& what, const std::vector<T>& got, const std::vector<double>& want) {
    const double tol = std::is_same_v<T, double> ? 1e-12 : std::is_same_v<T, float> ? 1e-5 : 2e-3;
    double scale = 1.0;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double g = to_double(got[i]);
        const bool same = std::fabs(g - want[i]) <= tol * scale || (std::isnan(g) && std::isnan(want[i]));
        if (!same && bad++ == 0) first = i;
    }
    if (got.size() != want.size() || bad) {
        check(false, what + ": " + std::to_string(bad) + " of " + std::to_string(want.size()) + " differ, first at " +
                         std::to_string(first));
    } else {
        check(true, what + " (" + std::to_string(want.size()) + " elements)");
    }
}

// A random CSR matrix, zero-based.
struct Csr {
    int rows = 0, cols = 0;
    std::vector<int> ptr{0}, ind;
    std::vector<double> val;
    std::int64_t nnz() const { return std::int64_t(ind.size()); }
    template <typename F> void for_each(F f) const {  // f(row, col, value, entry)
        for (int i = 0; i < rows; ++i)
            for (int e = ptr[i]; e < ptr[i + 1]; ++e) f(i, ind[e], val[e], e);
    }
};
Csr random_csr(int rows, int cols, double density) {
    Csr a;
    a.rows = rows, a.cols = cols;
    std::bernoulli_distribution keep(density);
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j)
            if (keep(rng)) a.ind.push_back(j), a.val.push_back(value());
        a.ptr.push_back(int(a.ind.size()));
    }
    return a;
}
template <typename T> std::vector<T> typed(const std::vector<double>& v) {
    std::vector<T> t(v.size());
    std::transform(v.begin(), v.end(), t.begin(), from_double<T>);
    return t;
}
std::vector<int> shifted(std::vector<int> v, int by) {
    for (auto& x : v) x += by;
    return v;
}

// ================================ common ================================
void test_common() {
    int version = 0;
    expect_ok(sgpuGetVersion(&version), "sgpuGetVersion");
    check(version == SGPU_VERSION, "sgpuGetVersion equals SGPU_VERSION");
    check(std::string(sgpuGetStatusName(SGPU_STATUS_INVALID_SIZE)) == "SGPU_STATUS_INVALID_SIZE", "sgpuGetStatusName");
    check(msrepCreate(nullptr) == SGPU_STATUS_INVALID_POINTER && std::strlen(sgpuGetLastErrorMessage()) > 0,
          "msrepCreate(nullptr) is INVALID_POINTER with a message");
}

// ================================ SpAMM ================================
// op(A)·op(B) with column-major storage, skipping block products whose norms multiply below tau.
template <typename T> void spamm_case(spammHandle_t h, sgpuOperation_t ta, sgpuOperation_t tb, int m, int n, int k,
                                      double alpha, double beta, bool tune) {
    const int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 3;
    auto A = random_vector<T>(std::size_t(lda) * (ta ? m : k)), B = random_vector<T>(std::size_t(ldb) * (tb ? k : n));
    auto C = random_vector<T>(std::size_t(ldc) * n);
    auto decay = [](std::vector<T>& v, int ld) {  // entries shrink away from the diagonal
        for (std::size_t x = 0; x < v.size(); ++x)
            v[x] = from_double<T>(to_double(v[x]) * std::pow(2.0, -std::abs(int(x % ld) - int(x / ld)) / 2.5));
    };
    double tau = 0.0, ratio = 1.0;
    int bs = 0;
    spammGetBlockSize(h, &bs);
    if (tune) {
        decay(A, lda), decay(B, ldb);
        expect_ok(spammTuneTau(h, value_type<T>, ta, tb, m, n, k, A.data(), lda, B.data(), ldb, 0.5, 0.1, 40, &tau,
                               &ratio),
                  "spammTuneTau");
        check(tau > 0 && ratio > 0 && ratio < 1,
              "spammTuneTau: tau " + std::to_string(tau) + " ratio " + std::to_string(ratio));
    }
    auto opA = [&](int i, int p) { return to_double(A[ta ? p + std::size_t(i) * lda : i + std::size_t(p) * lda]); };
    auto opB = [&](int p, int j) { return to_double(B[tb ? j + std::size_t(p) * ldb : p + std::size_t(j) * ldb]); };
    const int mb = (m + bs - 1) / bs, nb = (n + bs - 1) / bs, kb = (k + bs - 1) / bs;
    std::vector<double> na(std::size_t(mb) * kb), nbn(std::size_t(kb) * nb);
    for (int i = 0; i < m; ++i)
        for (int p = 0; p < k; ++p) na[(i / bs) * kb + p / bs] += opA(i, p) * opA(i, p);
    for (int p = 0; p < k; ++p)
        for (int j = 0; j < n; ++j) nbn[(p / bs) * nb + j / bs] += opB(p, j) * opB(p, j);
    auto used = [&](int i, int p, int j) { return std::sqrt(na[i * kb + p]) * std::sqrt(nbn[p * nb + j]) >= tau; };
    auto reference = [&](bool skip) {
        std::vector<double> want = doubles(C);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                double sum = 0;
                for (int p = 0; p < k; ++p)
                    if (!skip || used(i / bs, p / bs, j / bs)) sum += opA(i, p) * opB(p, j);
                want[i + std::size_t(j) * ldc] = alpha * sum + beta * want[i + std::size_t(j) * ldc];
            }
        return want;
    };
    const auto want = reference(true), exact = reference(false);
    std::int64_t performed = 0;
    for (int i = 0; i < mb; ++i)
        for (int j = 0; j < nb; ++j)
            for (int p = 0; p < kb; ++p) performed += used(i, p, j);
    const Scalar<T> a = Scalar<T>(alpha), b = Scalar<T>(beta);
    sgpuStatus_t st;
    if constexpr (std::is_same_v<T, double>)
        st = spammDgemm(h, ta, tb, m, n, k, &a, A.data(), lda, B.data(), ldb, &b, C.data(), ldc, tau);
    else if constexpr (std::is_same_v<T, float>)
        st = spammSgemm(h, ta, tb, m, n, k, &a, A.data(), lda, B.data(), ldb, &b, C.data(), ldc, tau);
    else
        st = spammHgemm(h, ta, tb, m, n, k, &a, A.data(), lda, B.data(), ldb, &b, C.data(), ldc, tau);
    const std::string what = std::string("spamm gemm ") + type_name<T>() + " " + "NT"[ta] + "NT"[tb] + " " +
                             std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " tau " +
                             std::to_string(tau);
    expect_ok(st, what);
    check_all(what, C, want);
    spammStats_t s{};
    expect_ok(spammGetStats(h, &s), "spammGetStats");
    check(s.performedProducts == performed && s.totalProducts == std::int64_t(mb) * nb * kb && s.tau == tau &&
              s.blockSize == bs,
          "spammGetStats counts " + std::to_string(s.performedProducts) + " of " + std::to_string(s.totalProducts));
    if (tune) {
        double err = 0;
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                const std::size_t x = i + std::size_t(j) * ldc;
                err += (exact[x] - to_double(C[x])) * (exact[x] - to_double(C[x]));
            }
        check(s.validRatio < 1 && std::sqrt(err) <= s.errorBound * (1 + 1e-9),
              "spammGetStats: valid ratio " + std::to_string(s.validRatio) + ", error " +
                  std::to_string(std::sqrt(err)) + " <= bound " + std::to_string(s.errorBound));
    }
}

void test_spamm() {
    SpammHandle h;
    expect_ok(spammCreate(h.out()), "spammCreate");
    spamm_case<double>(h, SGPU_OPERATION_T, SGPU_OPERATION_N, 40, 35, 50, 1.5, -0.5, false);
    expect_ok(spammSetBlockSize(h, 8), "spammSetBlockSize 8");
    spamm_case<float>(h, SGPU_OPERATION_N, SGPU_OPERATION_T, 27, 19, 33, -1.0, 2.0, false);
    spamm_case<half>(h, SGPU_OPERATION_T, SGPU_OPERATION_T, 18, 21, 14, 0.5, 1.0, false);
    spamm_case<double>(h, SGPU_OPERATION_N, SGPU_OPERATION_N, 61, 57, 64, 2.0, 0.25, true);
}

// ================================ SMaT ================================
template <typename T> void smat_case(smatHandle_t h, int base) {
    const Csr a = random_csr(33, 26, 0.2);
    SmatMatrix A;
    const auto vals = typed<T>(a.val);
    expect_ok(smatCreateCsr(h, A.out(), a.rows, a.cols, a.nnz(), shifted(a.ptr, base).data(),
                            shifted(a.ind, base).data(), vals.data(), value_type<T>, base),
              std::string("smatCreateCsr ") + type_name<T>());
    smatMatrixInfo_t info{};
    expect_ok(smatGetMatrixInfo(A, &info), "smatGetMatrixInfo");
    check(info.rows == a.rows && info.cols == a.cols && info.nnz == a.nnz() && info.valueType == value_type<T>,
          "smatGetMatrixInfo shape and nnz");
    for (sgpuLayout_t layout : {SGPU_LAYOUT_ROW_MAJOR, SGPU_LAYOUT_COL_MAJOR}) {
        const bool row = layout == SGPU_LAYOUT_ROW_MAJOR;
        const int n = 9, ldb = row ? n + 2 : a.cols + 1, ldc = row ? n + 3 : a.rows + 2;
        auto at = [row](int i, int j, int ld) { return row ? std::size_t(i) * ld + j : std::size_t(j) * ld + i; };
        const auto B = random_vector<T>(std::size_t(row ? a.cols : n) * ldb);
        auto C = random_vector<T>(std::size_t(row ? a.rows : n) * ldc);
        auto want = doubles(C);
        std::vector<double> product(std::size_t(a.rows) * n);
        a.for_each([&](int i, int c, double v, int) {
            for (int j = 0; j < n; ++j) product[std::size_t(i) * n + j] += v * to_double(B[at(c, j, ldb)]);
        });
        for (int i = 0; i < a.rows; ++i)
            for (int j = 0; j < n; ++j)
                want[at(i, j, ldc)] = -0.75 * product[std::size_t(i) * n + j] + 2.0 * want[at(i, j, ldc)];
        const Scalar<T> alpha = -0.75f, beta = 2.0f;
        const std::string what = std::string("smatSpMM ") + type_name<T>() + (row ? " row-major" : " col-major");
        expect_ok(smatSpMM(h, A, n, &alpha, B.data(), ldb, &beta, C.data(), ldc, layout), what);
        check_all(what, C, want);
    }
}

void test_smat() {
    SmatHandle h;
    expect_ok(smatCreate(h.out()), "smatCreate");
    expect_ok(smatSetReorderMode(h, SMAT_REORDER_MODE_ALWAYS), "smatSetReorderMode ALWAYS");
    expect_ok(smatSetJaccardThreshold(h, 0.6), "smatSetJaccardThreshold 0.6");
    smat_case<double>(h, SGPU_INDEX_BASE_ZERO);
    smat_case<float>(h, SGPU_INDEX_BASE_ONE);
    smat_case<half>(h, SGPU_INDEX_BASE_ZERO);
}

// ================================ MSREP ================================
template <typename T> void msrep_case(msrepHandle_t h, sgpuSparseFormat_t format, int parts) {
    const Csr a = random_csr(41, 36, 0.15);
    std::vector<int> major, minor;
    std::vector<double> v;
    if (format == SGPU_SPARSE_FORMAT_CSC) {  // column by column
        major.push_back(0);
        for (int c = 0; c < a.cols; ++c) {
            a.for_each([&](int i, int col, double x, int) {
                if (col == c) minor.push_back(i), v.push_back(x);
            });
            major.push_back(int(minor.size()));
        }
    } else {
        a.for_each([&](int i, int c, double x, int) { major.push_back(i), minor.push_back(c), v.push_back(x); });
        if (format == SGPU_SPARSE_FORMAT_CSR) major = a.ptr;
    }
    const auto vals = typed<T>(v);
    MsrepMatrix A;
    auto create = format == SGPU_SPARSE_FORMAT_CSR ? msrepCreateCsr : format == SGPU_SPARSE_FORMAT_CSC ? msrepCreateCsc
                                                                                                     : msrepCreateCoo;
    static const char* const format_names[] = {"CSR", "CSC", "COO"};
    const std::string name =
        std::string(format_names[format]) + " " + type_name<T>() + ", " + std::to_string(parts) + " partitions";
    expect_ok(create(h, A.out(), a.rows, a.cols, a.nnz(), major.data(), minor.data(), vals.data(), value_type<T>,
                     SGPU_INDEX_BASE_ZERO, parts),
              "msrepCreate " + name);
    int count = 0;
    expect_ok(msrepGetPartitionCount(A, &count), "msrepGetPartitionCount");
    std::int64_t sum = 0;
    bool ok = count == parts;
    for (int p = 0; p < count; ++p) {
        msrepPartitionInfo_t info{};
        ok = ok && msrepGetPartitionInfo(A, p, &info) == SGPU_STATUS_SUCCESS && info.format == format;
        sum += info.nnz;
    }
    check(ok && sum == a.nnz(), "msrepGetPartitionInfo: partition nnz sum to " + std::to_string(a.nnz()));
    const auto x = random_vector<T>(std::size_t(a.cols));
    auto y = random_vector<T>(std::size_t(a.rows));
    auto want = doubles(y);
    for (auto& w : want) w *= -1.5;
    a.for_each([&](int i, int c, double val, int) { want[i] += 0.5 * val * to_double(x[c]); });
    const Scalar<T> alpha = 0.5f, beta = -1.5f;
    expect_ok(msrepSpMV(h, A, &alpha, x.data(), &beta, y.data()), "msrepSpMV " + name);
    check_all("msrepSpMV " + name, y, want);
}

void test_msrep() {
    MsrepHandle h;
    expect_ok(msrepCreate(h.out()), "msrepCreate");
    // Any device list on the CPU backend; on CUDA only existing devices, and device 0 always exists.
    int backend = -1;
    expect_ok(msrepGetBackend(h, &backend), "msrepGetBackend");
    const int devices[] = {0, 1, 2};
    expect_ok(msrepSetDevices(h, backend == SGPU_BACKEND_CPU ? 3 : 1, devices), "msrepSetDevices");
    msrep_case<double>(h, SGPU_SPARSE_FORMAT_CSR, 4);
    msrep_case<float>(h, SGPU_SPARSE_FORMAT_CSC, 3);
    msrep_case<double>(h, SGPU_SPARSE_FORMAT_COO, 5);
    msrep_case<float>(h, SGPU_SPARSE_FORMAT_CSR, 2);
}

// ================================ SDDMM ================================
// out[e] = alpha·S[e]·(A·Bᵀ)[i][j] with sddmmDynamic, or sddmmExecutePlan when plan is given.
template <typename T> void sddmm_case(sddmmHandle_t h, const Csr& s, sddmmPlan_t plan, int k, sgpuLayout_t layout,
                                      sddmmAlgorithm_t expected, const std::string& label) {
    const bool row = layout == SGPU_LAYOUT_ROW_MAJOR;
    const int lda = row ? k + 1 : s.rows + 2, ldb = row ? k + 3 : s.cols + 1;
    auto at = [row](int i, int p, int ld) { return row ? std::size_t(i) * ld + p : std::size_t(p) * ld + i; };
    const auto A = random_vector<T>(std::size_t(row ? s.rows : k) * lda);
    const auto B = random_vector<T>(std::size_t(row ? s.cols : k) * ldb);
    const auto sv = typed<T>(s.val);
    std::vector<T> out(s.ind.size());
    std::vector<double> want(s.ind.size());
    s.for_each([&](int i, int j, double v, int e) {
        double dot = 0;
        for (int p = 0; p < k; ++p) dot += to_double(A[at(i, p, lda)]) * to_double(B[at(j, p, ldb)]);
        want[e] = 1.5 * v * dot;
    });
    const Scalar<T> alpha = 1.5f;
    const sgpuStatus_t st =
        plan ? sddmmExecutePlan(h, plan, k, &alpha, A.data(), lda, B.data(), ldb, layout, sv.data(), value_type<T>,
                                out.data())
             : sddmmDynamic(h, s.rows, s.cols, k, &alpha, A.data(), lda, B.data(), ldb, layout, s.nnz(), s.ptr.data(),
                            s.ind.data(), sv.data(), SGPU_INDEX_BASE_ZERO, value_type<T>, out.data());
    const std::string what = std::string(plan ? "sddmmExecutePlan " : "sddmmDynamic ") + label + " " + type_name<T>() +
                             (row ? " row-major" : " col-major");
    expect_ok(st, what);
    check_all(what, out, want);
    sddmmAlgorithm_t algorithm = -1;
    check(sddmmGetLastAlgorithm(h, &algorithm) == SGPU_STATUS_SUCCESS && algorithm == expected,
          std::string("sddmmGetLastAlgorithm is ") + (expected == SDDMM_ALGORITHM_TILED ? "TILED" : "COO"));
}

void test_sddmm() {
    SddmmHandle h;
    expect_ok(sddmmCreate(h.out()), "sddmmCreate");
    const Csr dense = random_csr(48, 52, 0.4);
    Csr sparse;  // 2 nonzeros in 250 x 260: density 3e-5
    sparse.rows = 250, sparse.cols = 260, sparse.ind = {259, 3}, sparse.val = {1.5, -0.25};
    for (int i = 0; i < sparse.rows; ++i) sparse.ptr.push_back(i < 10 ? 0 : i < 200 ? 1 : 2);
    sddmm_case<double>(h, dense, nullptr, 21, SGPU_LAYOUT_ROW_MAJOR, SDDMM_ALGORITHM_COO, "AUTO dense-ish");
    sddmm_case<float>(h, sparse, nullptr, 7, SGPU_LAYOUT_COL_MAJOR, SDDMM_ALGORITHM_COO, "AUTO very sparse");
    for (sddmmAlgorithm_t forced : {SDDMM_ALGORITHM_TILED, SDDMM_ALGORITHM_COO}) {
        const std::string label = forced == SDDMM_ALGORITHM_TILED ? "forced TILED" : "forced COO";
        expect_ok(sddmmSetAlgorithm(h, forced), "sddmmSetAlgorithm " + label);
        sddmm_case<float>(h, dense, nullptr, 66, SGPU_LAYOUT_COL_MAJOR, forced, label);
        sddmm_case<half>(h, sparse, nullptr, 12, SGPU_LAYOUT_ROW_MAJOR, forced, label);
    }
    expect_ok(sddmmSetAlgorithm(h, SDDMM_ALGORITHM_AUTO), "sddmmSetAlgorithm AUTO");
    SddmmPlan plan;
    expect_ok(sddmmCreatePlan(h, plan.out(), dense.rows, dense.cols, dense.nnz(), shifted(dense.ptr, 1).data(),
                              shifted(dense.ind, 1).data(), SGPU_INDEX_BASE_ONE),
              "sddmmCreatePlan (one-based)");
    sddmm_case<double>(h, dense, plan, 30, SGPU_LAYOUT_COL_MAJOR, SDDMM_ALGORITHM_COO, "AUTO");
    sddmm_case<half>(h, dense, plan, 10, SGPU_LAYOUT_ROW_MAJOR, SDDMM_ALGORITHM_COO, "AUTO");
}

}  // namespace

int main() {
    test_common();
    test_spamm();
    test_smat();
    test_msrep();
    test_sddmm();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#pragma once
// Vectorised float32 kernels on contiguous memory, built once per instruction set
// (kernels.inc compiled by avx512.cpp, avx2.cpp and baseline.cpp with their own -m flags)
// and picked at run time from what the CPU supports. The rest of the library is built for
// baseline x86-64 and calls these through table().
#include <cstdint>

#include "loom/core/api.h"

namespace loom::cpu::simd {

// gemm_rows' slices of K (gemm.inc): each element sums every slice in a chain of its own, then
// adds the slices' sums in order, so a product may be split at these edges and keep its bits.
constexpr int64_t kGemmSlice = 128;
// gemm_rows streams b row by row for up to this many rows (fewer rows than that are bound by
// reading b, not by their multiply-adds); more go through register tiles.
constexpr int64_t kGemmStreamRows = 8;

// Binary ops with a vector form; the index into Table's arrays.
// kReluGrad: x where y > 0 or y is NaN, else 0 (relu's backward; x the gradient, y relu's output).
enum Binary : int { kAdd, kSub, kMul, kDiv, kMax, kMin, kReluGrad, kNumBinary };
// Unary ops with a vector form.
enum Unary : int { kNeg, kAbs, kSquare, kRelu, kSqrt, kExp, kLog, kTanh, kSigmoid, kNumUnary };

// Where a max-pooling kernel writes each window's argmax (flat index in the plane): int64
// (the indices PyTorch's API returns), int32 (a gradient's workspace: half the memory
// traffic), or nowhere when both are null.
struct PoolIndex {
  int64_t* i64 = nullptr;
  int32_t* i32 = nullptr;
  explicit operator bool() const { return i64 || i32; }
  PoolIndex at(int64_t offset) const {
    return {i64 ? i64 + offset : nullptr, i32 ? i32 + offset : nullptr};
  }
};

// One plane's max-pooling geometry (h x w in, ho x wo out; k kernel, s stride, p padding,
// d dilation, per axis).
struct PoolGeometry {
  int64_t h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw;
};
// Row width and float count of max_pool_any's scratch plane (padded so that every vector
// load stays inside it, for any vector width up to 16 floats).
inline int64_t pool_scratch_width(const PoolGeometry& g) {
  const int64_t wo16 = (g.wo + 15) / 16 * 16;
  const int64_t need = wo16 * g.sw + (g.kw - 1) * g.dw + 32;
  return need > g.pw + g.w ? need : g.pw + g.w;
}
inline int64_t pool_scratch_size(const PoolGeometry& g) { return g.h * pool_scratch_width(g); }

// One Adam / AdamW step's constants (torch.optim.Adam's arithmetic; see train/adam.cpp).
struct AdamArgs {
  float decay;     // AdamW: 1 - lr * weight_decay (1: none)
  float l2;        // Adam: weight_decay added to the gradient (0: none)
  float b1, omb1;  // beta1, 1 - beta1
  float b2, omb2;  // beta2, 1 - beta2
  float neg_step;  // -lr / (1 - beta1^t)
  float bc2;       // sqrt(1 - beta2^t)
  float eps;
  float grad_scale = 1.0f;  // each gradient value is multiplied by it first (1: as it is)
};

struct Table {
  const char* isa;  // "avx512", "avx2" or "baseline"
  int lanes;        // floats per vector: 16, 8 or 4 (one zmm, ymm or xmm register)
  // o[i] = x[i] op y[i]; vs: y is one value; sv: x is one value. o may equal x or y.
  void (*binary_vv[kNumBinary])(float* o, const float* x, const float* y, int64_t n);
  void (*binary_vs[kNumBinary])(float* o, const float* x, float y, int64_t n);
  void (*binary_sv[kNumBinary])(float* o, float x, const float* y, int64_t n);
  void (*unary[kNumUnary])(float* o, const float* x, int64_t n);
  // Sum and NaN-propagating max/min of n contiguous values (n >= 1 for max/min).
  float (*sum)(const float* x, int64_t n);
  // Sum of the squares of n contiguous values.
  float (*sum_squares)(const float* x, int64_t n);
  float (*max)(const float* x, int64_t n);
  float (*min)(const float* x, int64_t n);
  // acc[j] += sum over r < rows of x[r * ld + j], for j < n.
  void (*sum_rows_into)(float* acc, const float* x, int64_t rows, int64_t ld, int64_t n);
  // acc[j] = max(acc[j], x[r * ld + j]) for r < rows in order, for j < n: a NaN wins and stays,
  // and of equal values the first one (in acc, then in row order) is kept (a blocked max pooling).
  void (*max_rows_into)(float* acc, const float* x, int64_t rows, int64_t ld, int64_t n);
  // Softmax (or log-softmax) of each of `rows` contiguous rows of length n.
  void (*softmax_rows)(float* out, const float* x, int64_t rows, int64_t n, bool log);
  // Cross-entropy over rows of length n: each row's max m and ls = log(sum exp(x - m)) (so that
  // log-softmax is (x - m) - ls, as softmax_rows computes it); and the backward of one row,
  // o = exp((x - m) - ls) * g.
  void (*max_log_sum_exp_rows)(float* m, float* ls, const float* x, int64_t rows, int64_t n);
  void (*exp_shift_scale)(float* o, const float* x, int64_t n, float m, float ls, float g);
  // 2x2 / stride 2 max pooling of one h x w plane into ho x wo (2 * ho <= h, 2 * wo <= w):
  // values, and (idx set) the flat in-plane index of each window's first maximum; a NaN
  // wins its window (the last NaN when several), as PyTorch.
  void (*max_pool_2x2)(float* y, PoolIndex idx, const float* x, int64_t ho, int64_t w, int64_t wo);
  // The same rules for any geometry g; scratch holds pool_scratch_size(g) floats.
  void (*max_pool_any)(float* y, PoolIndex idx, const float* x, const PoolGeometry& g, float* scratch);
  // Layer norm of `rows` contiguous rows of length n: per-row mean and rstd = 1 / sqrt(var + eps)
  // and y = (x - mean) * rstd * w + b (w, b: n values, either may be null).
  void (*layer_norm_rows)(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                          int64_t rows, int64_t n, double eps);
  // Its backward for `rows` rows: gx (null: not wanted) and gw_acc[j] += sum g * xhat,
  // gb_acc[j] += sum g over the rows (either null).
  void (*layer_norm_backward_rows)(float* gx, float* gw_acc, float* gb_acc, const float* g, const float* x,
                                   const float* mean, const float* rstd, const float* w, int64_t rows, int64_t n);
  // Batch-norm statistics over n floats, accumulated in double (float vector lanes for runs of
  // a few thousand values): s[0] += sum (x - m), s[1] += sum (x - m)^2; and for the gradient
  // s[0] += sum g, s[1] += sum g (x - m).
  void (*centred_sums)(const float* x, int64_t n, float m, double* s);
  void (*grad_sums)(const float* x, const float* g, int64_t n, float m, double* s);
  // Batch norm's per-channel passes over n floats: the output y = x * a + b (the statistics and
  // the affine folded into a and b), and the input gradient gx = g * k1 - k2 - (x - m) * k3.
  void (*scale_shift)(float* y, const float* x, int64_t n, float a, float b);
  void (*batch_norm_input_grad)(float* gx, const float* g, const float* x, int64_t n, float k1, float k2, float m,
                                float k3);
  // One Adam step over n contiguous parameters p with gradient g and moments m, v (vmax: the
  // AMSGrad maximum, or null), updated in place.
  void (*adam)(float* p, const float* g, float* m, float* v, float* vmax, int64_t n, const AdamArgs& a);
  // Winograd F(2x2, 3x3) over vectors of b channels (a blocked layout's channel block).
  // Input: the 4x4 patch of vectors d[16] (row-major; null: padding, zeros) into
  // v[e * e_stride + lane] = (B^T d B)[e] for the 16 positions e. Output: the 16 products
  // m[e * e_stride + lane] into the 2x2 tile y = A^T m A, plus bias (null: none), plus what out
  // holds when `sum` (a residual), ReLU'd when `relu`, stored at out[i] (null: outside the image).
  void (*winograd_f2_input)(float* v, int64_t e_stride, const float* const* d, int64_t b);
  void (*winograd_f2_output)(float* const* out, const float* m, int64_t e_stride, const float* bias, bool sum, bool relu,
                             int64_t b);
  // F(4x4, 3x3), the same way: the 6x6 patch d[36] into 36 positions, and 36 products into the
  // 4x4 tile out[16].
  void (*winograd_f4_input)(float* v, int64_t e_stride, const float* const* d, int64_t b);
  void (*winograd_f4_output)(float* const* out, const float* m, int64_t e_stride, const float* bias, bool sum, bool relu,
                             int64_t b);
  // The batch-invariant product block (gemm.inc): c[i * ldc + j] = sum over k < K of
  // a[i * lda + k] * b[k * ldb + j] for i < m, j < n, n a multiple of `lanes`; each element one
  // multiply-add per k in order from 0 within each slice of kGemmSlice k, the slices' sums then
  // added in order, so its bits do not depend on m or on the blocking (and are the same on the
  // AVX2 and AVX-512 builds).
  void (*gemm_rows)(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t m, int64_t n,
                    int64_t K);
  // The same for b stored transposed (bt: n x K rows, any n): c[i * ldc + j] = dot(row i of a,
  // row j of bt), in W lanes folded at the end; bits depending on the two rows and K only.
  void (*gemm_rows_bt)(float* c, int64_t ldc, const float* a, int64_t lda, const float* bt, int64_t ldbt, int64_t m,
                       int64_t n, int64_t K);
  // Row i of a (m x K floats, row stride lda) as int16 for gemm_rows_q8 (quantized.inc):
  // out[i * ldo + k] = round(a[i * lda + k] * 32767 / max |a row i|), ties to even, zeros in
  // [K, ldo); scale[i] = max |a row i| / 32767 (0 for a row of zeros, NaN for a row holding an
  // infinity or NaN). ldo at least K rounded up to a multiple of 2W.
  void (*round_rows_i16)(int16_t* out, int64_t ldo, float* scale, const float* a, int64_t lda, int64_t m, int64_t K);
  // c = a (m x K int16 rows from round_rows_i16, row stride lda, their scales ascale) times the
  // transpose of the int8 matrix q (n x K, row stride ldq), row j of q scaled by
  // scales[j * ng + g] over its columns [g * group, (g + 1) * group), ng = ceil(K / group)
  // (quantized.inc): c[i, j] = ascale[i] * sum over g of scales[j, g] * (the exact integer dot of
  // the group), + bias[j] when bias is not null. The prefetch takes q's rows to be consecutive
  // (ldq = K).
  void (*gemm_rows_q8)(float* c, int64_t ldc, const int16_t* a, int64_t lda, const float* ascale, const signed char* q,
                       int64_t ldq, const float* scales, const float* bias, int64_t group, int64_t m, int64_t n, int64_t K);
  // dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols (transpose.inc): W x W blocks
  // in registers.
  void (*transpose)(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);
  // c += a b with gemm_rows' blocking and rules: each element's chain of multiply-adds starts
  // from c's value (gemm.inc).
  void (*gemm_rows_add)(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t m,
                        int64_t n, int64_t K);
  // The fused attention's tile passes, a tile per call (attention.inc): the online softmax's step
  // over `rows` rows of n scores (row stride lds) with the running max m, sum l and accumulator
  // rows acc (row stride ldacc, nacc columns) rescaled; x = exp(x - sub) over rows of n; and
  // dp = (dp - d) p over rows of n.
  void (*online_softmax_rows)(float* s, int64_t lds, int64_t rows, int64_t n, float* m, float* l, float* acc,
                              int64_t ldacc, int64_t nacc);
  void (*exp_minus_rows)(float* x, int64_t ld, const float* sub, int64_t rows, int64_t n);
  void (*softmax_grad_rows)(float* dp, int64_t ld, const float* p, const float* d, int64_t rows, int64_t n);
};

const Table& table();

// The per-ISA tables (defined in the per-ISA translation units).
namespace avx512 { LOOM_INTERNAL const Table& get(); }
namespace avx2 { LOOM_INTERNAL const Table& get(); }
namespace baseline { LOOM_INTERNAL const Table& get(); }

}  // namespace loom::cpu::simd

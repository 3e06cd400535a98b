// Batched matmul: float32/float64 on OpenBLAS (see docs/kernels.md for the choice), integers
// on a plain loop. Operands with a unit stride on either of their last two axes are passed
// to BLAS as they are (as transposed when needed); others are made contiguous first.
#include <cblas.h>

#include <cstring>

#include "core/parallel_hooks.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"

namespace loom::cpu {

namespace {

struct BlasView {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// How BLAS can read the last two axes of a 3-d operand, if at all.
bool blas_view(const Tensor& t, BlasView& v) {
  const int64_t rows = t.shape()[1], cols = t.shape()[2];
  const int64_t rs = t.strides()[1], cs = t.strides()[2];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(1, cols)) {
    v = {CblasNoTrans, std::max<int64_t>(rs, 1)};
    return true;
  }
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(1, rows)) {
    v = {CblasTrans, std::max<int64_t>(cs, 1)};
    return true;
  }
  return false;
}

void set_blas_threads(int n) { openblas_set_num_threads(n); }

}  // namespace

void init_blas_threads() { detail::set_thread_count_listener(set_blas_threads); }

void matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {
    fill(out, 0);
    return;
  }
  const DType dt = out.dtype();
  if (dt == DType::Float32 || dt == DType::Float64) {
    BlasView va, vb;
    Tensor a = a_in, b = b_in;
    if (!blas_view(a, va)) { a = Tensor(std::make_shared<Storage>(a_in.nbytes(), a_in.device()), a_in.shape(), contiguous_strides(a_in.shape()), 0, dt); copy(a, a_in); blas_view(a, va); }
    if (!blas_view(b, vb)) { b = Tensor(std::make_shared<Storage>(b_in.nbytes(), b_in.device()), b_in.shape(), contiguous_strides(b_in.shape()), 0, dt); copy(b, b_in); blas_view(b, vb); }
    const int64_t sa = a.strides()[0], sb = b.strides()[0];
    for (int64_t i = 0; i < batch; ++i) {
      if (dt == DType::Float32) {
        cblas_sgemm(CblasRowMajor, va.trans, vb.trans, M, N, K, 1.0f, a.data<float>() + i * sa, va.ld,
                    b.data<float>() + i * sb, vb.ld, 0.0f, out.data<float>() + i * M * N, N);
      } else {
        cblas_dgemm(CblasRowMajor, va.trans, vb.trans, M, N, K, 1.0, a.data<double>() + i * sa, va.ld,
                    b.data<double>() + i * sb, vb.ld, 0.0, out.data<double>() + i * M * N, N);
      }
    }
    return;
  }
  detail::dispatch_compute(dt, "matmul", [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_same_v<T, bool>, bool, T>;
    const T* A = static_cast<const T*>(a_in.data_ptr());
    const T* B = static_cast<const T*>(b_in.data_ptr());
    T* O = static_cast<T*>(out.data_ptr());
    const auto& as = a_in.strides();
    const auto& bs = b_in.strides();
    parallel_for(0, batch * M, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, N * K)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t bi = r / M, m = r % M;
        for (int64_t n = 0; n < N; ++n) {
          Acc acc{};
          for (int64_t k = 0; k < K; ++k) {
            const T x = A[bi * as[0] + m * as[1] + k * as[2]];
            const T y = B[bi * bs[0] + k * bs[1] + n * bs[2]];
            if constexpr (std::is_same_v<T, bool>) acc = acc || (x && y);
            else acc = static_cast<Acc>(acc + x * y);
          }
          O[(bi * M + m) * N + n] = static_cast<T>(acc);
        }
      }
    });
  });
}

}  // namespace loom::cpu

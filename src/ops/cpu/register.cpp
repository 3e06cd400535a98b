#include "ops/cpu/kernels.h"
#include "ops/cpu/nn_kernels.h"

namespace loom::detail {

void register_cpu_backend() {
  static const Backend table{
      cpu::copy,     cpu::fill,      cpu::binary,     cpu::unary,      cpu::where,
      cpu::reduce,   cpu::cumsum,    cpu::matmul,     cpu::take,       cpu::index_add,
      cpu::take_along, cpu::scatter_add_along, cpu::put, cpu::nonzero, cpu::random,
      // neural-network kernels (nn_kernels.h)
      cpu::conv2d, cpu::conv2d_backward_data, cpu::conv2d_backward_weights,
      cpu::max_pool2d, cpu::avg_pool2d, cpu::avg_pool2d_backward,
      cpu::batch_norm_train, cpu::batch_norm_backward,
      cpu::max_pool2d_backward, cpu::layer_norm, cpu::layer_norm_backward,
      // dense linear algebra (linalg.cpp)
      cpu::cholesky, cpu::lu_solve, cpu::slogdet, cpu::qr, cpu::svd, cpu::eigh, cpu::lstsq,
  };
  register_backend(DeviceType::CPU, &table);
  cpu::init_blas_threads();
}

}  // namespace loom::detail

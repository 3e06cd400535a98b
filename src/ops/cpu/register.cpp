#include "ops/cpu/kernels.h"
#include "ops/cpu/nn_kernels.h"

namespace loom::detail {

void register_cpu_backend() {
  static const Backend table{
      // by name (declaration order), so a kernel cannot land in another one's slot
      .copy = cpu::copy,
      .fill = cpu::fill,
      .binary = cpu::binary,
      .unary = cpu::unary,
      .where = cpu::where,
      .reduce = cpu::reduce,
      .sum_squares_f32 = cpu::sum_squares_f32,
      .cumsum = cpu::cumsum,
      .matmul = cpu::matmul,
      .matmul_bias = cpu::matmul_bias,
      .take = cpu::take,
      .index_add = cpu::index_add,
      .take_along = cpu::take_along,
      .scatter_add_along = cpu::scatter_add_along,
      .put = cpu::put,
      .nonzero = cpu::nonzero,
      .random = cpu::random,
      .conv2d = cpu::conv2d,
      .conv2d_backward_data = cpu::conv2d_backward_data,
      .conv2d_backward_weights = cpu::conv2d_backward_weights,
      .conv2d_fused = cpu::conv2d_fused_onednn,
      .conv2d_blocked = cpu::conv2d_blocked_onednn,
      .reorder_blocked = cpu::reorder_blocked_onednn,
      .max_pool2d_blocked = cpu::max_pool2d_blocked,
      .elementwise_chain = cpu::elementwise_chain,
      .max_pool2d = cpu::max_pool2d,
      .avg_pool2d = cpu::avg_pool2d,
      .avg_pool2d_backward = cpu::avg_pool2d_backward,
      .batch_norm_train = cpu::batch_norm_train,
      .batch_norm_backward = cpu::batch_norm_backward,
      .batch_norm_sums = cpu::batch_norm_sums,
      .batch_norm_apply = cpu::batch_norm_apply,
      .batch_norm_grad_sums = cpu::batch_norm_grad_sums,
      .batch_norm_input_grad = cpu::batch_norm_input_grad,
      .max_pool2d_backward = cpu::max_pool2d_backward,
      .layer_norm = cpu::layer_norm,
      .layer_norm_backward = cpu::layer_norm_backward,
      .lstm_cell = cpu::lstm_cell,
      .lstm_cell_backward = cpu::lstm_cell_backward,
      .softmax_lastdim_f32 = cpu::softmax_lastdim_f32,
      .gelu_tanh_f32 = cpu::gelu_tanh_f32,
      .gelu_tanh_backward_f32 = cpu::gelu_tanh_backward_f32,
      .cross_entropy_rows_f32 = cpu::cross_entropy_rows_f32,
      .cross_entropy_rows_backward_f32 = cpu::cross_entropy_rows_backward_f32,
      .attention_forward = cpu::attention_forward,
      .attention_backward = cpu::attention_backward,
      .matmul_int8 = cpu::matmul_int8,
      .sgd_update = cpu::sgd_update,
      .adam_update = cpu::adam_update,
      .rmsprop_update = cpu::rmsprop_update,
      .adagrad_update = cpu::adagrad_update,
      .cholesky = cpu::cholesky,
      .lu_solve = cpu::lu_solve,
      .slogdet = cpu::slogdet,
      .qr = cpu::qr,
      .svd = cpu::svd,
      .eigh = cpu::eigh,
      .lstsq = cpu::lstsq,
  };
  register_backend(DeviceType::CPU, &table);
  cpu::init_blas_threads();
}

}  // namespace loom::detail

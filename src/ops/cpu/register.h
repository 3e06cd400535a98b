#pragma once
// The CPU table's parts: each kernel file fills its own slots of the table (add_<file>_kernels,
// at the file's end, beside its kernels), and register_cpu_backend() (register.cpp) runs them
// all. A kernel is one line in its file's function; a new kernel file adds its function here
// and in register.cpp's kParts.
#include "ops/backend.h"

namespace loom::cpu {

void add_copy_fill_kernels(detail::Backend& b);
void add_binary_kernels(detail::Backend& b);
void add_unary_kernels(detail::Backend& b);
void add_reduce_kernels(detail::Backend& b);
void add_sum_squares_kernels(detail::Backend& b);
void add_matmul_kernels(detail::Backend& b);
void add_index_kernels(detail::Backend& b);
void add_random_kernels(detail::Backend& b);
void add_conv_ref_kernels(detail::Backend& b);
void add_conv_onednn_kernels(detail::Backend& b);
void add_conv_onednn_blocked_kernels(detail::Backend& b);
void add_elementwise_chain_kernels(detail::Backend& b);
void add_pool_kernels(detail::Backend& b);
void add_batch_norm_kernels(detail::Backend& b);
void add_layer_norm_kernels(detail::Backend& b);
void add_lstm_kernels(detail::Backend& b);
void add_softmax_kernels(detail::Backend& b);
void add_gelu_kernels(detail::Backend& b);
void add_cross_entropy_kernels(detail::Backend& b);
void add_attention_flash_kernels(detail::Backend& b);
void add_quantized_kernels(detail::Backend& b);
void add_optimizers_kernels(detail::Backend& b);
void add_linalg_kernels(detail::Backend& b);

}  // namespace loom::cpu

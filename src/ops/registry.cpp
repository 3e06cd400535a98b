#include "loom/ops/registry.h"

namespace loom {

const std::vector<OpInfo>& op_registry() {
  static const std::vector<OpInfo> ops = {
      // elementwise binary
      {"add", "elementwise", true}, {"subtract", "elementwise", true}, {"multiply", "elementwise", true},
      {"divide", "elementwise", true}, {"power", "elementwise", true}, {"maximum", "elementwise", true},
      {"minimum", "elementwise", true}, {"mod", "elementwise", true}, {"floor_divide", "elementwise", false},
      {"equal", "elementwise", false}, {"not_equal", "elementwise", false}, {"less", "elementwise", false},
      {"less_equal", "elementwise", false}, {"greater", "elementwise", false}, {"greater_equal", "elementwise", false},
      {"logical_and", "elementwise", false}, {"logical_or", "elementwise", false}, {"logical_xor", "elementwise", false},
      {"logical_not", "elementwise", false}, {"where", "elementwise", true}, {"clip", "elementwise", true},
      // elementwise unary
      {"abs", "elementwise", true}, {"sign", "elementwise", false}, {"negative", "elementwise", true},
      {"exp", "elementwise", true}, {"log", "elementwise", true}, {"log1p", "elementwise", true},
      {"expm1", "elementwise", true}, {"sqrt", "elementwise", true}, {"rsqrt", "elementwise", true},
      {"square", "elementwise", true}, {"sin", "elementwise", true}, {"cos", "elementwise", true},
      {"tanh", "elementwise", true}, {"sigmoid", "elementwise", true}, {"relu", "elementwise", true},
      {"leaky_relu", "elementwise", true}, {"elu", "elementwise", true}, {"gelu", "elementwise", true}, {"silu", "elementwise", true},
      {"softplus", "elementwise", true}, {"erf", "elementwise", true}, {"floor", "elementwise", false},
      {"ceil", "elementwise", false}, {"round", "elementwise", false}, {"astype", "elementwise", true},
      // reductions
      {"sum", "reduction", true}, {"mean", "reduction", true}, {"prod", "reduction", true}, {"max", "reduction", true},
      {"min", "reduction", true}, {"argmax", "reduction", false}, {"argmin", "reduction", false},
      {"var", "reduction", true}, {"std", "reduction", true}, {"logsumexp", "reduction", true},
      {"all", "reduction", false}, {"any", "reduction", false}, {"cumsum", "reduction", true},
      {"softmax", "reduction", true}, {"log_softmax", "reduction", true},
      // linear algebra
      {"matmul", "linalg", true}, {"linear", "linalg", true}, {"dot", "linalg", true}, {"outer", "linalg", true}, {"tensordot", "linalg", true},
      {"kron", "linalg", true}, {"einsum", "linalg", true}, {"linalg.norm", "linalg", true},
      {"linalg.svd", "linalg", true}, {"linalg.svdvals", "linalg", true}, {"linalg.qr", "linalg", true},
      {"linalg.eigh", "linalg", true}, {"linalg.eigvalsh", "linalg", true}, {"linalg.cholesky", "linalg", true},
      {"linalg.solve", "linalg", true}, {"linalg.inv", "linalg", true}, {"linalg.det", "linalg", true},
      {"linalg.slogdet", "linalg", true}, {"linalg.lstsq", "linalg", true}, {"sparse.mm", "linalg", true},
      // manipulation
      {"reshape", "manipulation", true}, {"transpose", "manipulation", true}, {"squeeze", "manipulation", true},
      {"expand_dims", "manipulation", true}, {"broadcast_to", "manipulation", true}, {"slice", "manipulation", true},
      {"concatenate", "manipulation", true}, {"stack", "manipulation", true}, {"split", "manipulation", true},
      {"pad", "manipulation", true}, {"tile", "manipulation", true}, {"repeat", "manipulation", true},
      {"flip", "manipulation", true},
      // indexing
      {"index", "indexing", true}, {"take", "indexing", true}, {"take_along_axis", "indexing", true},
      {"scatter_add", "indexing", true}, {"index_put", "indexing", true},
      // neural networks (docs/nn_ops.md)
      {"conv1d", "nn", true}, {"conv2d", "nn", true}, {"conv2d_transpose", "nn", true},
      {"max_pool2d", "nn", true}, {"avg_pool2d", "nn", true}, {"global_avg_pool2d", "nn", true},
      {"global_max_pool2d", "nn", true}, {"batch_norm", "nn", true}, {"layer_norm", "nn", true}, {"rms_norm", "nn", true},
      {"dropout", "nn", true}, {"embedding", "nn", true}, {"cross_entropy", "nn", true},
      {"nll_loss", "nn", true}, {"binary_cross_entropy_with_logits", "nn", true},
      {"scaled_dot_product_attention", "nn", true}, {"lstm_cell", "nn", true}, {"rotary_embedding", "nn", true},
  };
  return ops;
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& op : op_registry())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace loom

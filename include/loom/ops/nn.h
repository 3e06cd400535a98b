#pragma once
// Other neural-network functions (torch.nn.functional): dropout and embedding.
#include <cstdint>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/random.h"

namespace loom {

// Inverted dropout: when training, zeroes each element with probability p (drawn from `gen`,
// or the default generator) and scales the kept ones by 1 / (1 - p); otherwise returns x.
// p = 1 gives zeros. Differentiable in x (the gradient goes through the same mask).
LOOM_API Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

// Rows of weight (num_embeddings, dim) picked by integer ids of any shape: the result has shape
// ids.shape + (dim,). Ids must lie in [0, num_embeddings). The gradient of weight accumulates
// over repeated ids; with padding_idx >= 0 the row padding_idx gets no gradient (as PyTorch).
// A negative padding_idx means none (unlike PyTorch, where -1 names the last row).
LOOM_API Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);

}  // namespace loom

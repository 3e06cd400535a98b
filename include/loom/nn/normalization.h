#pragma once
// Normalization layers: BatchNorm (over channels, axis 1; synchronizable across replicas) and
// LayerNorm (over the last axis).
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

struct LOOM_API BatchNormOptions {
  double momentum = 0.1;
  double eps = 1e-5;
  bool affine = true;  // learnable weight (ones) and bias (zeros)
  // Synchronized: in Train mode the batch statistics are those of the whole batch across the
  // data-parallel replicas (nn/replicas.h, installed by loom::dist), not of this process's part.
  bool sync = false;
  // the layer's attributes (nn/attributes.h)
  template <class Visit>
  void fields(Visit&& visit) {
    visit("momentum", momentum);
    visit("eps", eps);
    visit("affine", affine);
    visit("sync", sync, Field::may_be_absent());  // files written before synchronized batch norm lack it
  }
};

// What a LayerNorm layer is besides its input and state.
struct LOOM_API LayerNormAttributes {
  double eps = 1e-5;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("eps", eps);
  }
};

// What an RMSNorm layer is besides its input and state.
struct LOOM_API RMSNormAttributes {
  double eps = 1e-6;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("eps", eps);
  }
};

// Normalizes over axis 1 with batch statistics in Train mode (updating the running averages)
// and the running averages in Eval mode; buffers "running_mean" and "running_var".
class LOOM_API BatchNorm : public Layer {
 public:
  BatchNorm(const Layer& input, BatchNormOptions options = {}, const std::string& name = "");
  explicit BatchNorm(BatchNormOptions options = {}, const std::string& name = "");  // bound by its first call
};

// Makes every BatchNorm layer among `layers` synchronized (or not): returns how many there
// are. loom/graph/graph.h adds the form that takes a whole graph.
LOOM_API int64_t sync_batch_norm(const std::vector<Layer>& layers, bool sync = true);

// Normalizes over the last axis (n_units), with learnable weight and bias.
class LOOM_API LayerNorm : public Layer {
 public:
  LayerNorm(const Layer& input, double eps = 1e-5, const std::string& name = "");
  explicit LayerNorm(double eps = 1e-5, const std::string& name = "");  // bound by its first call
};

// Root-mean-square normalization over the last axis (n_units) with a learnable weight ("weight",
// ones at first) and no bias: Llama's RMSNorm (loom::rms_norm). eps 1e-6 as transformers' default
// (a Llama config's rms_norm_eps).
class LOOM_API RMSNorm : public Layer {
 public:
  RMSNorm(const Layer& input, double eps = 1e-6, const std::string& name = "");
  explicit RMSNorm(double eps = 1e-6, const std::string& name = "");  // bound by its first call
};

}  // namespace loom::nn

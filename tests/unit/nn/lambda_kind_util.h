#pragma once
// The Lambda kind "Affine" (y = x * w + b, w a declared parameter, b a declared buffer), registered
// once per process: layer_api_test and layer_registry_test's every-kind round trip both use it.
#include <loom/core/tensor.h>
#include <loom/nn/lambda.h>
#include <loom/nn/registry.h>
#include <loom/nn/state.h>
#include <loom/ops/elementwise.h>

namespace loom_test {

inline loom::Tensor affine(const std::vector<loom::Tensor>& in, loom::nn::State& s) { return in[0] * s.param("w") + s.buffer("b"); }

inline void register_affine() {
  if (!loom::nn::is_layer_kind_registered("Affine")) loom::nn::register_lambda_kind("Affine", affine);
}

}  // namespace loom_test

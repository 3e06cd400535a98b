#pragma once
// Parameter initializers, chosen by value in layer options.
#include <string>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/ops/random.h"

namespace loom::nn {

struct LOOM_API Init {
  enum class Kind : uint8_t { GlorotUniform, GlorotNormal, HeUniform, HeNormal, Orthogonal, Zeros, Ones, Constant, Normal, Uniform };
  Kind kind = Kind::GlorotUniform;
  double a = 0;  // Constant: value; Normal: mean; Uniform: low; Orthogonal: gain (0 = 1)
  double b = 0;  // Normal: stddev; Uniform: high

  static Init glorot_uniform() { return {Kind::GlorotUniform}; }
  static Init glorot_normal() { return {Kind::GlorotNormal}; }
  static Init he_uniform() { return {Kind::HeUniform}; }
  static Init he_normal() { return {Kind::HeNormal}; }
  static Init orthogonal(double gain = 1) { return {Kind::Orthogonal, gain}; }
  static Init zeros() { return {Kind::Zeros}; }
  static Init ones() { return {Kind::Ones}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
  static Init normal(double mean = 0, double stddev = 0.05) { return {Kind::Normal, mean, stddev}; }
  static Init uniform(double low = -0.05, double high = 0.05) { return {Kind::Uniform, low, high}; }
  std::string name() const;
  // {"kind": name, "a": a, "b": b}
  std::string to_json() const;
  // The initializer called `kind` (as name() spells it); throws ValueError listing the names.
  static Init from_name(const std::string& kind, double a = 0, double b = 0);
};

// A new tensor of `shape` drawn from `init`. Fans: shape[0] in, shape[1] out for matrices;
// for higher ranks (out, in, k...) as convolution kernels.
// Every layer creates its parameters and buffers through it.
LOOM_API Tensor initialize(const Init& init, const Shape& shape, DType dtype = Float32, Generator* gen = nullptr);

// While one is alive on this thread, initialize() leaves the tensors it creates unfilled (their
// values are about to be overwritten) and refuses, before allocating, to create more than
// `max_bytes` in all (ValueError). io::load_model builds the architecture of a file under one,
// bounded by the bytes of the tensors the file holds: a small file cannot ask for gigabytes.
class LOOM_API ParamBudget {
 public:
  explicit ParamBudget(uint64_t max_bytes);
  ~ParamBudget();
  ParamBudget(const ParamBudget&) = delete;
  ParamBudget& operator=(const ParamBudget&) = delete;
  // Takes `bytes` from the budget or throws ValueError naming `what` (the tensor).
  void take(uint64_t bytes, const std::string& what);

 private:
  ParamBudget* previous_;
  uint64_t left_, max_;
};

}  // namespace loom::nn

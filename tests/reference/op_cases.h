#pragma once
// The one table of op test cases shared by the PyTorch differential check (loom_opcheck +
// check_ops.py) and the float64 finite-difference gradient check (tests/unit/autograd/gradcheck_test.cpp).
// Each case names a registry op, builds its inputs from specs (shape, dtype, value domain,
// memory layout, differentiability) and computes the op with a C++ lambda. `attrs` is a JSON
// object holding everything the Python side needs to replay the op (axes, keepdims, ...).
#include <loom/core/dtype.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace loom::reftest {

enum class Domain : uint8_t {
  Normal,        // uniform in [-2, 2]
  Positive,      // uniform in [0.5, 2.5]
  AwayFromZero,  // |x| in [0.5, 2], random sign (no kinks at 0 for abs/relu)
  Distinct,      // a shuffled grid with spacing 0.1: no ties anywhere (max/min, argmax)
  Unit,          // uniform in [-0.9, 0.9]
  Wide,          // uniform in [-6, 6]
  Ties,          // values from {-1, 0, 1}: deliberate ties and zeros
  SmallInt,      // integers in [-5, 5]
  NonzeroInt,    // integers in [-5, 5] without 0
  Bool,          // random true/false
  Index,         // integers in [lo, hi) (index arrays)
};

// How the op sees the input: a contiguous tensor, or a real strided view of a larger base.
enum class Layout : uint8_t {
  Contiguous,
  Transposed,  // base of reversed shape, viewed transposed
  Strided,     // base with a doubled (+1) last axis, viewed as [..., 1::2]
  Reversed,    // base of the same shape, viewed as [::-1] on axis 0 (negative stride)
};

struct InputSpec {
  Shape shape;
  DType dtype = Float32;
  Domain domain = Domain::Normal;
  bool diff = false;  // marked requires_grad (only floating inputs)
  Layout layout = Layout::Contiguous;
  int64_t lo = 0, hi = 0;      // Index domain range
  std::vector<double> values;  // explicit row-major values of the base tensor (overrides domain)

  InputSpec dom(Domain d) const { auto c = *this; c.domain = d; return c; }
  InputSpec lay(Layout l) const { auto c = *this; c.layout = l; return c; }
  InputSpec nodiff() const { auto c = *this; c.diff = false; return c; }
  InputSpec vals(std::vector<double> v) const { auto c = *this; c.values = std::move(v); return c; }
};

using CaseFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpCase {
  std::string op;     // registry name
  std::string label;  // human-readable
  std::vector<InputSpec> inputs;
  CaseFn fn;
  std::string attrs = "{}";  // JSON object for the Python replay
  bool gradcheck = true;     // false where finite differences are meaningless (ties, kinks)
};

const std::vector<OpCase>& op_cases();

// Builds the inputs of a case. With `to_float64`, floating inputs are made float64 (gradcheck).
// Differentiable inputs are leaves with requires_grad set (views detached from their base).
std::vector<Tensor> make_inputs(const OpCase& c, uint64_t seed, bool to_float64 = false);

// Row-major values for an input of `n` elements drawn from its domain (or its explicit values).
std::vector<double> gen_values(const InputSpec& s, int64_t n, std::mt19937_64& rng);
uint64_t splitmix(uint64_t x);  // seed mixing

// A random tensor (uniform in [-1, 1]) of the given shape and floating dtype: the cotangent.
Tensor random_cotangent(const Shape& shape, DType dtype, uint64_t seed);

// Registry ops with no case / differentiable ops with no case that has a differentiable input
// (and, with `gradcheck`, that is also enabled for finite differences).
std::vector<std::string> ops_without_cases();
std::vector<std::string> differentiable_ops_without_grad_cases(bool gradcheck);

}  // namespace loom::reftest

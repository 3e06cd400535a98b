#pragma once
// Input (a stateful placeholder), Constant (a fixed tensor) and Param (a scalar hyperparameter) layers.
#include <functional>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// What an Input is (nn/attributes.h): its declared shape (-1 for a size known at run time) and
// dtype, saved as its options.
struct LOOM_API InputAttributes {
  std::vector<int64_t> shape;
  DType dtype = Float32;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("shape", shape, Field::range(-1, Field::kMaxSize));
    visit("dtype", dtype);
  }
};

// Sources (Input, Constant, Param) take no inputs: their shape rule is the default, the declared
// shape (compile() gives a graph input the shape it is given instead).
//
// A stateful placeholder. shape may hold -1 for dimensions fixed only at run time; an Input of
// n_units has shape (-1, n_units).
class LOOM_API Input : public Layer {
 public:
  explicit Input(int64_t n_units, DType dtype = Float32, const std::string& name = "");
  Input(const Shape& shape, DType dtype, const std::string& name = "");
  // Checks the value's shape (dynamic dims match anything) and dtype.
  void set_value(const Tensor& value) const;
  // Value used when none was set.
  void set_default(const Tensor& value) const;
  bool has_value() const;
  Tensor value() const;  // throws ValueError naming the input when it holds none
  void clear() const;
  explicit Input(std::shared_ptr<LayerImpl> impl);  // view a Layer of kind "Input" as Input
};

// A Constant's and a Param's attributes: none besides their value (their output, saved by each
// kind's own options()), structs that the kinds are read by type with (attributes_of).
struct LOOM_API ConstantAttributes {};
struct LOOM_API ParamAttributes {};

// A fixed tensor as a layer.
class LOOM_API Constant : public Layer {
 public:
  explicit Constant(const Tensor& value, const std::string& name = "");
};

// A scalar hyperparameter (learning rate, dropout probability) that can change while training;
// observers are called with the new value.
class LOOM_API Param : public Layer {
 public:
  explicit Param(double value, const std::string& name = "");
  double value() const;
  void set_value(double value) const;
  void observe(std::function<void(double)> observer) const;
};

}  // namespace loom::nn

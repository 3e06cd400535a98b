#pragma once
// Layers for sparse inputs and weight dropout (docs/sparse.md):
//   SparseInput   a placeholder whose value is a SparseTensor (bag-of-words rows, as TensorX's
//                 Input(sparse=True)); Linear and DropConnect over it compute sparse x dense
//                 products, and the gradient reaches their weights;
//   DropConnect   a Linear layer with dropout on its weights (Wan et al. 2013).
#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"
#include "loom/ops/sparse.h"

namespace loom::nn {

// What a SparseInput is (nn/attributes.h): its columns and dtype (float32 or float64).
struct LOOM_API SparseInputAttributes {
  int64_t n_units = 0;
  DType dtype = Float32;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_units", n_units, Field::sizes(1));
    visit("dtype", dtype);
  }
};

// Shape (-1, n_units): a value has any number of rows and n_units columns, float32/float64 of the
// input's dtype. The value is held by the layer (as Input::set_value) and read when the graph
// runs (Layer::operator(), Plan::run): it is not one of the graph's positional inputs. Only
// layers that take sparse inputs (Linear, DropConnect) may read it.
class LOOM_API SparseInput : public Layer {
 public:
  explicit SparseInput(int64_t n_units, DType dtype = Float32, const std::string& name = "");
  explicit SparseInput(std::shared_ptr<LayerImpl> impl);  // view a Layer of kind "SparseInput"
  // ShapeError / DTypeError naming the input unless the value is 2-d with n_units columns and of
  // the input's dtype.
  void set_value(const SparseTensor& value) const;
  // A batch as a data pipeline holds it (what Model::fit gives the input): float rows
  // (rows, n_units), kept where non-zero; or integer ids (rows, length), each id >= 0 an entry
  // of weight 1 in its row (repeats add up) and -1 padding. IndexError naming the input for an
  // id outside [-1, n_units).
  void set_value(const Tensor& rows) const;
  bool has_value() const;
  SparseTensor value() const;  // ValueError naming the input when it holds none
  void clear() const;
};

struct LOOM_API DropConnectOptions {
  bool bias = true;  // the bias is not dropped
  Init weight_init = Init::glorot_uniform();
  Init bias_init = Init::zeros();
  uint64_t seed = 0;  // the masks' stream (kept in the state: checkpoints resume it)
};

// What a DropConnect layer is besides its input and state. The initializers and the seed only
// shape the first weights and masks (the state holds them after), and are saved all the same.
struct LOOM_API DropConnectAttributes {
  int64_t n_units = 0;
  double probability = 0.5;
  bool bias = true;
  uint64_t seed = 0;
  Init weight_init = Init::glorot_uniform();
  Init bias_init = Init::zeros();
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_units", n_units, Field::sizes(1));
    visit("probability", probability);
    visit("bias", bias);
    visit("seed", seed);
    visit("weight_init", weight_init);
    visit("bias_init", bias_init);
  }
};

// y = x @ (W * M / (1 - p)) + b in Train mode, with M a fresh Bernoulli(1 - p) mask of W's shape
// per call (shared by the batch), and y = x @ W + b otherwise: Eval equals a Linear layer with the
// same weights. Gradients reach only the kept weights. Parameters "weights" (in, n_units) and
// "bias" as Linear's. Shape rule: (..., in) -> (..., n_units), the leading sizes the input's.
class LOOM_API DropConnect : public Layer {
 public:
  DropConnect(const Layer& input, int64_t n_units, double probability, DropConnectOptions options = {},
              const std::string& name = "");
};

}  // namespace loom::nn

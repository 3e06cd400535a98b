#pragma once
// Layers that encode integer ids: OneHot and Lookup (Embedding) with its options.
#include <string>

#include "loom/core/api.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"

namespace loom::nn {

// What a OneHot layer is besides its input (nn/attributes.h).
struct LOOM_API OneHotAttributes {
  int64_t n_classes = 0;
  DType dtype = Float32;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_classes", n_classes, Field::sizes(1));
    visit("dtype", dtype);
  }
};

// Integer ids (any shape) -> one-hot float vectors with n_classes units.
class LOOM_API OneHot : public Layer {
 public:
  OneHot(const Layer& ids, int64_t n_classes, DType dtype = Float32, const std::string& name = "");
};

struct LOOM_API LookupOptions {
  int64_t padding_id = -1;  // this id maps to zeros and its row gets no gradient; -1 for none
  Init init = Init::normal(0, 0.05);
  // Over a SparseInput (a bag of ids per row, weighted by the values): how a row's rows of the
  // table combine, as tf.nn.embedding_lookup_sparse: "sum", "mean" (over the weights' sum) or
  // "sqrtn" (over the square root of the squared weights' sum). Dense ids ignore it.
  std::string combiner = "sum";
};

// What a Lookup layer is besides its input and state (nn/attributes.h).
struct LOOM_API LookupAttributes {
  int64_t vocab_size = 0, n_units = 0, padding_id = -1;
  Init init = Init::normal(0, 0.05);
  std::string combiner = "sum";
  template <class Visit>
  void fields(Visit&& visit) {
    visit("vocab_size", vocab_size, Field::sizes(1));
    visit("n_units", n_units, Field::sizes(1));
    visit("padding_id", padding_id, Field::range(-1, Field::kMaxSize));
    visit("init", init);
    visit("combiner", combiner, Field::may_be_absent());  // files written before sparse ids lack it
  }
};

// Embedding lookup: integer ids of any shape -> (..., n_units) rows of a (vocab_size, n_units)
// table. Repeated ids accumulate gradient. Over a SparseInput of vocab_size columns (each row a
// bag of ids with weights, e.g. word counts) -> (rows, n_units): the rows' table rows weighted
// and combined by options.combiner (TensorX's Lookup on sparse input, torch's EmbeddingBag).
class LOOM_API Lookup : public Layer {
 public:
  Lookup(const Layer& ids, int64_t vocab_size, int64_t n_units, LookupOptions options = {}, const std::string& name = "");
};
using Embedding = Lookup;

// What a PositionEmbedding layer is besides its input and state (nn/attributes.h).
struct LOOM_API PositionEmbeddingAttributes {
  int64_t n_positions = 0, n_units = 0;
  Init init = Init::normal(0, 0.02);
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_positions", n_positions, Field::sizes(1));
    visit("n_units", n_units, Field::sizes(1));
    visit("init", init);
  }
};

// Learned absolute positions (GPT-2's wpe): for an input (N, T, ...) whose axis 1 is the
// sequence, the rows 0 .. T-1 of a (n_positions, n_units) table "weights", shape (T, n_units),
// which an Add broadcasts over the batch. Only the input's length is read (ids of any integer
// dtype, or features). A sequence longer than n_positions is a ShapeError naming both.
class LOOM_API PositionEmbedding : public Layer {
 public:
  PositionEmbedding(const Layer& sequence, int64_t n_positions, int64_t n_units, Init init = Init::normal(0, 0.02),
                    const std::string& name = "");
};

}  // namespace loom::nn

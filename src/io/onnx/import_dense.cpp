// ONNX import, dense layers (importer.h): Gemm and MatMul (+ Add) as Linear, Gather of a table as
// Lookup, OneHot, LayerNormalization and BatchNormalization, their initializers as the layers'
// parameters and buffers.
#include "io/onnx/importer.h"

#include <cmath>

#include "loom/core/error.h"
#include "loom/ops/creation.h"
#include "loom/ops/manipulation.h"

namespace loom::io::detail {

// y = x W (+ b): a Linear named `name`, W (in, out)
void Importer::linear(const nn::Layer& x, const Tensor& w, const Tensor* bias, const std::string& value_name) {
  if (w.ndim() != 2) throw Unsupported("the weight matrix has rank " + std::to_string(w.ndim()) + " (a Linear's is 2)");
  if (rank_of(x) < 1) throw Unsupported("its input is a scalar");
  const int64_t in = w.shape()[0], units = w.shape()[1];
  const int64_t xin = x.shape().back();
  if (xin != in) throw Unsupported("the input has " + std::to_string(xin) + " features, the weights " + std::to_string(in));
  Tensor b;
  if (bias) {
    if (bias->numel() == units) b = bias->reshape({units});
    else if (bias->numel() == 1) b = full({units}, scalar_of(*bias), bias->dtype());
    else throw Unsupported("the bias has the shape " + shape_str(bias->shape()) + ", not (" + std::to_string(units) + ")");
    for (size_t k = 0; k + 1 < bias->shape().size(); ++k)
      if (bias->shape()[k] != 1) throw Unsupported("the bias has the shape " + shape_str(bias->shape()) + ", not (" + std::to_string(units) + ")");
  }
  nn::LinearOptions lo;
  lo.bias = bias != nullptr;
  nn::Linear l(x, units, lo, unique(value_name));
  param(l, "weights", w.contiguous());
  if (bias) param(l, "bias", b.contiguous());
  set(value_name, l);
}

void Importer::import_gemm() {
  only_attrs({"alpha", "beta", "transA", "transB"});
  single_output();
  if (attr_int("transA", 0) != 0) throw Unsupported("transA = 1 (Loom's Linear reads (batch, features))");
  if (attr_float("alpha", 1.0f) != 1.0f) throw Unsupported("alpha != 1");
  const bool has_c = has_input(2);
  if (has_c && attr_float("beta", 1.0f) != 1.0f) throw Unsupported("beta != 1");
  const nn::Layer x = floating(value(0));
  if (rank_of(x) != 2) throw Unsupported("A has rank " + std::to_string(rank_of(x)) + ", not 2");
  Tensor w = constant(1, "B (the weights)");
  if (w.ndim() != 2) throw Unsupported("B has rank " + std::to_string(w.ndim()));
  if (attr_int("transB", 0) != 0) w = transpose(w).contiguous();
  Tensor c;
  if (has_c) c = constant(2, "C (the bias)");
  linear(x, w, has_c ? &c : nullptr, out());
}

void Importer::import_matmul() {
  single_output();
  const nn::Layer x = floating(value(0));
  const Tensor& w = constant(1, "right operand (the weights)");
  if (rank_of(x) < 2) throw Unsupported("the left operand has rank " + std::to_string(rank_of(x)) + " (a Linear's input has a batch axis)");
  // MatMul + Add of a constant bias read by nothing else: one Linear with a bias
  const int k = sole_reader(out());
  if (k >= 0 && w.ndim() == 2) {
    const onnx::NodeProto& a = g_.node(k);
    if (a.op_type() == "Add" && a.domain().empty() && a.input_size() == 2 && a.output_size() == 1) {
      const std::string other = a.input(0) == out() ? a.input(1) : a.input(0);
      auto it = consts_.find(other);
      if (it != consts_.end() && it->second.numel() == w.shape()[1] && it->second.ndim() <= rank_of(x)) {
        bool ones = true;
        for (size_t d = 0; d + 1 < it->second.shape().size(); ++d) ones = ones && it->second.shape()[d] == 1;
        if (ones) {
          linear(x, w, &it->second, a.output(0));
          done_.insert(k);
          return;
        }
      }
    }
  }
  linear(x, w, nullptr, out());
}

// ------------------------------------------------------------------ embeddings, one-hot
// Gather of rows of a float32 table (an initializer) by integer ids: a Lookup (embedding).
void Importer::import_gather() {
  only_attrs({"axis"});
  single_output();
  if (!is_const(0)) throw Unsupported("its data is computed (Loom's Lookup gathers from a table of weights: an initializer)");
  const Tensor& table = constant(0, "data");
  if (attr_int("axis", 0) != 0) throw Unsupported("axis " + std::to_string(attr_int("axis", 0)) + " (an embedding lookup gathers rows: axis 0)");
  if (table.ndim() != 2) throw Unsupported("data of rank " + std::to_string(table.ndim()) + " (Loom's Lookup reads a (vocabulary, units) table)");
  if (table.dtype() != DType::Float32) throw Unsupported(std::string("a table of dtype ") + dtype_name(table.dtype()) + " (Loom's Lookup is float32)");
  if (table.shape()[0] < 1 || table.shape()[1] < 1) throw Unsupported("an empty table");
  const nn::Layer ids = value(1);
  if (ids.dtype() != DType::Int64 && ids.dtype() != DType::Int32)
    throw Unsupported(std::string("indices of dtype ") + dtype_name(ids.dtype()) + " (valid: int64, int32)");
  if (rank_of(ids) < 1) throw Unsupported("scalar indices (a Lookup's ids have a batch axis)");
  nn::Lookup l(ids, table.shape()[0], table.shape()[1], {}, unique(out()));
  if (batchless_.count(ids.impl().get())) batchless_.insert(l.impl().get());  // a table of positions
  param(l, "weights", table);
  set(out(), l);
}

// OneHot with values (0, 1) on the last axis: a OneHot layer of the values' dtype.
void Importer::import_one_hot() {
  only_attrs({"axis"});
  single_output();
  const nn::Layer ids = value(0);
  const int64_t r = rank_of(ids) + 1;
  if (norm_axis(attr_int("axis", -1), r) != r - 1)
    throw Unsupported("axis " + std::to_string(attr_int("axis", -1)) + " (Loom's OneHot adds the classes as the last axis)");
  if (!is_integral(ids.dtype())) throw Unsupported(std::string("indices of dtype ") + dtype_name(ids.dtype()) + " (Loom's OneHot reads integer ids)");
  const Tensor& depth = constant(1, "depth");
  if (depth.numel() != 1) throw Unsupported("depth has " + std::to_string(depth.numel()) + " values (one is valid)");
  const double d = scalar_of(depth);
  if (!(d >= 1 && d <= kMaxAttr) || d != std::floor(d)) throw Unsupported("depth " + std::to_string(d) + " (valid: an integer from 1 to 2^20)");
  const Tensor& values = constant(2, "values");
  if (values.numel() != 2) throw Unsupported("values has " + std::to_string(values.numel()) + " elements (off and on: 2)");
  const Tensor v = values.astype(DType::Float64).contiguous();
  const double off = static_cast<const double*>(v.data_ptr())[0], on = static_cast<const double*>(v.data_ptr())[1];
  if (off != 0 || on != 1) throw Unsupported("values (" + std::to_string(off) + ", " + std::to_string(on) + ") (Loom's OneHot writes 0 and 1)");
  set(out(), nn::OneHot(ids, static_cast<int64_t>(d), values.dtype(), unique(out())));
}

void Importer::import_layer_norm() {
  only_attrs({"axis", "epsilon", "stash_type"});
  single_output();
  const nn::Layer x = floating(value(0));
  const int64_t r = rank_of(x);
  if (norm_axis(attr_int("axis", -1), r) != r - 1) throw Unsupported("axis " + std::to_string(attr_int("axis", -1)) + " of rank " + std::to_string(r) + " (Loom's LayerNorm is over the last axis)");
  const Tensor& scale = constant(1, "Scale");
  const int64_t n = x.shape().back();
  if (scale.ndim() != 1 || scale.shape()[0] != n) throw Unsupported("Scale of the shape " + shape_str(scale.shape()));
  Tensor bias = has_input(2) ? constant(2, "B") : zeros(scale.shape(), scale.dtype());
  if (bias.shape() != scale.shape()) throw Unsupported("B of the shape " + shape_str(bias.shape()));
  nn::Layer l = nn::LayerNorm(x, float_attr(attr_float("epsilon", 1e-5f)), unique(out()));
  param(l, "weight", scale);
  param(l, "bias", bias);
  set(out(), l);
}

void Importer::import_batch_norm() {
  only_attrs({"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"});
  single_output();
  if (attr_int("training_mode", 0) != 0) throw Unsupported("training_mode = 1 (the file computes batch statistics: an exported training graph)");
  if (attr_int("spatial", 1) != 1) throw Unsupported("spatial = 0");
  const nn::Layer x = floating(value(0));
  if (rank_of(x) < 2) throw Unsupported("the input has rank < 2");
  const Tensor &scale = constant(1, "scale"), &bias = constant(2, "B"), &mean = constant(3, "mean"), &var = constant(4, "var");
  for (const Tensor* t : {&scale, &bias, &mean, &var})
    if (t->ndim() != 1) throw Unsupported("a statistic or scale of rank " + std::to_string(t->ndim()) + " (they are per channel)");
  for (const Tensor* t : {&scale, &bias, &mean, &var})
    if (t->shape()[0] != x.shape()[1])
      throw Unsupported("the input has " + std::to_string(x.shape()[1]) + " channels, a statistic or scale " + std::to_string(t->shape()[0]));
  const double momentum = float_attr(attr_float("momentum", 0.9f)), eps = float_attr(attr_float("epsilon", 1e-5f));
  nn::BatchNorm l(x, {.momentum = float_attr(static_cast<float>(1.0 - momentum)), .eps = eps}, unique(out()));
  param(l, "weight", scale);
  param(l, "bias", bias);
  param(l, "running_mean", mean);
  param(l, "running_var", var);
  set(out(), l);
}

std::vector<Converter> Importer::dense_converters() {
  return {
      {"", "Gemm", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_gemm(); }},
      {"", "MatMul", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_matmul(); }},
      {"", "Gather", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_gather(); }},
      {"", "OneHot", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_one_hot(); }},
      {"", "LayerNormalization", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_layer_norm(); }},
      {"", "BatchNormalization", kFirstOpset, kLastOpset, true, [](Importer& im) { im.import_batch_norm(); }},
  };
}

}  // namespace loom::io::detail

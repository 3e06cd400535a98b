// The registry's neural-network ops (docs/nn_ops.md) under their registry names, with
// torch.nn.functional's argument names: loom.conv2d(x, w, b, stride=2, padding="same").
#include <string>

#include "common.h"
#include "loom/core/error.h"
#include "loom/ops/attention.h"
#include "loom/ops/conv.h"
#include "loom/ops/losses.h"
#include "loom/ops/nn.h"
#include "loom/ops/normalization.h"
#include "loom/ops/pooling.h"
#include "loom/ops/random.h"
#include "loom/ops/recurrent.h"
#include "loom/ops/rotary.h"

namespace loom::python {

namespace {

Tensor optional_tensor(nb::handle obj) { return obj.is_none() ? Tensor() : as_tensor(obj); }

IntList int_list(nb::handle obj) {
  if (obj.is_none()) return IntList();
  if (PyLong_Check(obj.ptr())) return IntList(nb::cast<int64_t>(obj));
  return IntList(to_shape(obj));
}

ConvPadding conv_padding(nb::handle obj) {
  if (nb::isinstance<nb::str>(obj)) return ConvPadding(nb::cast<std::string>(obj));
  if (PyLong_Check(obj.ptr())) return ConvPadding(nb::cast<int64_t>(obj));
  return ConvPadding(to_shape(obj));
}

Reduction reduction(const std::string& name) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  throw ValueError("loom: reduction '" + name + "' is not one of 'mean', 'sum', 'none'");
}

void bind_convolutions(nb::module_& m) {
  m.def("conv1d", [](ArrayLike x, ArrayLike w, ArrayLike b, ShapeLike stride, ShapeLike padding, ShapeLike dilation,
                     int64_t groups) {
    const Tensor tx = as_tensor(x), tw = as_tensor(w), tb = optional_tensor(b);
    const IntList s = int_list(stride), d = int_list(dilation);
    const ConvPadding p = conv_padding(padding);
    nb::gil_scoped_release release;
    return conv1d(tx, tw, tb, s, p, d, groups);
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1, nb::arg("padding") = 0,
        nb::arg("dilation") = 1, nb::arg("groups") = 1, "1-d convolution of x (N, C, L) with weight (O, C / groups, K), as torch's conv1d; padding is an int, per-axis ints, or \"same\" / \"valid\".");
  m.def("conv2d", [](ArrayLike x, ArrayLike w, ArrayLike b, ShapeLike stride, ShapeLike padding, ShapeLike dilation,
                     int64_t groups) {
    const Tensor tx = as_tensor(x), tw = as_tensor(w), tb = optional_tensor(b);
    const IntList s = int_list(stride), d = int_list(dilation);
    const ConvPadding p = conv_padding(padding);
    nb::gil_scoped_release release;
    return conv2d(tx, tw, tb, s, p, d, groups);
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1, nb::arg("padding") = 0,
        nb::arg("dilation") = 1, nb::arg("groups") = 1, "2-d convolution of x (N, C, H, W) with weight (O, C / groups, KH, KW), as torch's conv2d; padding is an int, per-axis ints, or \"same\" / \"valid\".");
  m.def("conv2d_transpose", [](ArrayLike x, ArrayLike w, ArrayLike b, ShapeLike stride, ShapeLike padding,
                               ShapeLike output_padding, int64_t groups, ShapeLike dilation) {
    const Tensor tx = as_tensor(x), tw = as_tensor(w), tb = optional_tensor(b);
    const IntList s = int_list(stride), p = int_list(padding), op = int_list(output_padding), d = int_list(dilation);
    nb::gil_scoped_release release;
    return conv2d_transpose(tx, tw, tb, s, p, op, groups, d);
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1, nb::arg("padding") = 0,
        nb::arg("output_padding") = 0, nb::arg("groups") = 1, nb::arg("dilation") = 1, "The transposed 2-d convolution (the gradient of conv2d with respect to its input) of x with weight (C, O / groups, KH, KW), as torch's conv_transpose2d.");
}

void bind_pooling(nb::module_& m) {
  m.def("max_pool2d", [](ArrayLike x, ShapeLike kernel_size, ShapeLike stride, ShapeLike padding, ShapeLike dilation,
                         bool ceil_mode) {
    const Tensor t = as_tensor(x);
    const IntList k = int_list(kernel_size), s = int_list(stride), p = int_list(padding), d = int_list(dilation);
    nb::gil_scoped_release release;
    return max_pool2d(t, k, s, p, d, ceil_mode);
  }, nb::arg("x"), nb::arg("kernel_size"), nb::arg("stride") = nb::none(), nb::arg("padding") = 0, nb::arg("dilation") = 1,
        nb::arg("ceil_mode") = false, "The maximum over each kernel_size window of x (N, C, H, W), as torch's max_pool2d (stride None: kernel_size).");
  m.def("avg_pool2d", [](ArrayLike x, ShapeLike kernel_size, ShapeLike stride, ShapeLike padding, bool ceil_mode,
                         bool count_include_pad, int64_t divisor_override) {
    const Tensor t = as_tensor(x);
    const IntList k = int_list(kernel_size), s = int_list(stride), p = int_list(padding);
    nb::gil_scoped_release release;
    return avg_pool2d(t, k, s, p, ceil_mode, count_include_pad, divisor_override);
  }, nb::arg("x"), nb::arg("kernel_size"), nb::arg("stride") = nb::none(), nb::arg("padding") = 0,
        nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true, nb::arg("divisor_override") = 0, "The mean over each kernel_size window of x (N, C, H, W), as torch's avg_pool2d (stride None: kernel_size; divisor_override 0: none).");
  m.def("global_avg_pool2d", [](ArrayLike x) {
    const Tensor t = as_tensor(x);
    nb::gil_scoped_release release;
    return global_avg_pool2d(t);
  }, nb::arg("x"), "The mean of each channel of x (N, C, H, W) over H and W: (N, C, 1, 1).");
  m.def("global_max_pool2d", [](ArrayLike x) {
    const Tensor t = as_tensor(x);
    nb::gil_scoped_release release;
    return global_max_pool2d(t);
  }, nb::arg("x"), "The maximum of each channel of x (N, C, H, W) over H and W: (N, C, 1, 1).");
}

void bind_normalizations(nb::module_& m) {
  m.def("batch_norm", [](ArrayLike x, ArrayLike running_mean, ArrayLike running_var, ArrayLike weight, ArrayLike bias,
                         bool training, double momentum, double eps) {
    const Tensor tx = as_tensor(x), rm = optional_tensor(running_mean), rv = optional_tensor(running_var);
    const Tensor w = optional_tensor(weight), b = optional_tensor(bias);
    nb::gil_scoped_release release;
    return batch_norm(tx, rm, rv, w, b, training, momentum, eps);
  }, nb::arg("x"), nb::arg("running_mean"), nb::arg("running_var"), nb::arg("weight") = nb::none(),
        nb::arg("bias") = nb::none(), nb::arg("training") = false, nb::arg("momentum") = 0.1, nb::arg("eps") = 1e-5, "Batch normalization of x (N, C, ...) per channel, as torch's batch_norm: with training=True the batch's statistics, updating running_mean and running_var by momentum; else the running ones.");
  m.def("layer_norm", [](ArrayLike x, ShapeLike normalized_shape, ArrayLike weight, ArrayLike bias, double eps) {
    const Tensor tx = as_tensor(x), w = optional_tensor(weight), b = optional_tensor(bias);
    const Shape shape = to_shape(normalized_shape);
    nb::gil_scoped_release release;
    return layer_norm(tx, shape, w, b, eps);
  }, nb::arg("x"), nb::arg("normalized_shape"), nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(),
        nb::arg("eps") = 1e-5, "Layer normalization of x over its last axes normalized_shape, scaled by weight and shifted by bias when given.");
  m.def("rms_norm", [](ArrayLike x, ShapeLike normalized_shape, ArrayLike weight, double eps) {
    const Tensor tx = as_tensor(x), w = optional_tensor(weight);
    const Shape shape = to_shape(normalized_shape);
    nb::gil_scoped_release release;
    return rms_norm(tx, shape, w, eps);
  }, nb::arg("x"), nb::arg("normalized_shape"), nb::arg("weight") = nb::none(), nb::arg("eps") = 1e-6, "x divided by the root mean square over its last axes normalized_shape (plus eps), scaled by weight when given.");
}

void bind_embeddings_and_dropout(nb::module_& m) {
  m.def("rotary_embedding", [](ArrayLike x, int64_t offset, double base, double linear_factor, double llama3_factor,
                               double low_freq_factor, double high_freq_factor, int64_t original_max_positions) {
    const Tensor t = as_tensor(x);
    const RotaryOptions o{.base = base, .linear_factor = linear_factor, .llama3_factor = llama3_factor,
                          .low_freq_factor = low_freq_factor, .high_freq_factor = high_freq_factor,
                          .original_max_positions = original_max_positions};
    nb::gil_scoped_release release;
    return rotary_embedding(t, offset, o);
  }, nb::arg("x"), nb::arg("offset") = 0, nb::arg("base") = 10000.0, nb::arg("linear_factor") = 1.0, nb::arg("llama3_factor") = 0.0,
        nb::arg("low_freq_factor") = 1.0, nb::arg("high_freq_factor") = 4.0, nb::arg("original_max_positions") = 8192,
        "Rotary position embedding of x (..., T, D), Llama's rotate-half pairs, positions offset, offset + 1, ...");
  m.def("dropout", [](ArrayLike x, double p, bool training, GeneratorArg generator) {
    Generator* g = generator.is_none() ? nullptr : &nb::cast<Generator&>(generator);
    const Tensor t = as_tensor(x);
    MaybeRelease release(elements_of(t));
    return dropout(t, p, training, g);
  }, nb::arg("x"), nb::arg("p") = 0.5, nb::arg("training") = true, nb::arg("generator") = nb::none(), "With training=True, each element zeroed with probability p and the rest scaled by 1 / (1 - p); x itself otherwise.");
  m.def("embedding", [](ArrayLike weight, ArrayLike ids, int64_t padding_idx) {
    const Tensor w = as_tensor(weight), i = as_tensor(ids);
    MaybeRelease release(elements_of(w, i));
    return embedding(w, i, padding_idx);
  }, nb::arg("weight"), nb::arg("ids"), nb::arg("padding_idx") = -1, "The rows of weight at ids (any shape): ids.shape + (D,). Row padding_idx (when >= 0) gets no gradient; a negative one means none.");
}

void bind_losses(nb::module_& m) {
  m.def("cross_entropy", [](ArrayLike logits, ArrayLike target, ArrayLike weight, const std::string& red,
                            int64_t ignore_index, double label_smoothing) {
    const Tensor l = as_tensor(logits), t = as_tensor(target), w = optional_tensor(weight);
    const Reduction r = reduction(red);
    nb::gil_scoped_release release;
    return cross_entropy(l, t, w, r, ignore_index, label_smoothing);
  }, nb::arg("logits"), nb::arg("target"), nb::arg("weight") = nb::none(), nb::arg("reduction") = "mean",
        nb::arg("ignore_index") = -100, nb::arg("label_smoothing") = 0.0, "The cross-entropy of logits (N, C, ...) against class indices target, as torch's cross_entropy (weight per class, reduction \"mean\", \"sum\" or \"none\", ignore_index, label_smoothing).");
  m.def("nll_loss", [](ArrayLike log_probs, ArrayLike target, ArrayLike weight, const std::string& red,
                       int64_t ignore_index) {
    const Tensor l = as_tensor(log_probs), t = as_tensor(target), w = optional_tensor(weight);
    const Reduction r = reduction(red);
    nb::gil_scoped_release release;
    return nll_loss(l, t, w, r, ignore_index);
  }, nb::arg("log_probs"), nb::arg("target"), nb::arg("weight") = nb::none(), nb::arg("reduction") = "mean",
        nb::arg("ignore_index") = -100, "The negative log-likelihood of log_probs (N, C, ...) at the class indices target, as torch's nll_loss.");
  m.def("binary_cross_entropy_with_logits", [](ArrayLike logits, ArrayLike targets, ArrayLike weight,
                                               ArrayLike pos_weight, const std::string& red) {
    const Tensor l = as_tensor(logits), t = as_tensor(targets), w = optional_tensor(weight), pw = optional_tensor(pos_weight);
    const Reduction r = reduction(red);
    nb::gil_scoped_release release;
    return binary_cross_entropy_with_logits(l, t, w, pw, r);
  }, nb::arg("logits"), nb::arg("targets"), nb::arg("weight") = nb::none(), nb::arg("pos_weight") = nb::none(),
        nb::arg("reduction") = "mean", "The binary cross-entropy of sigmoid(logits) against targets, computed from the logits without overflow, as torch's binary_cross_entropy_with_logits.");
}

void bind_attention_and_recurrent(nb::module_& m) {
  m.def("scaled_dot_product_attention", [](ArrayLike q, ArrayLike k, ArrayLike v, ArrayLike mask, bool is_causal,
                                           std::optional<double> scale) {
    const Tensor tq = as_tensor(q), tk = as_tensor(k), tv = as_tensor(v), tm = optional_tensor(mask);
    nb::gil_scoped_release release;
    return scaled_dot_product_attention(tq, tk, tv, tm, is_causal, scale);
  }, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask") = nb::none(), nb::arg("is_causal") = false,
        nb::arg("scale") = nb::none(), "softmax(q @ k.T * scale + mask) @ v over the last two axes, as torch's scaled_dot_product_attention: scale None is 1 / sqrt(q's last size); a bool mask is True where a position is attended, a float one is added to the scores; is_causal masks the later positions.");
  m.def("lstm_cell", [](ArrayLike gates, ArrayLike c) {
    const Tensor g = as_tensor(gates), tc = as_tensor(c);
    nb::gil_scoped_release release;
    return lstm_cell(g, tc);
  },
        nb::arg("gates"), nb::arg("c"), "The LSTM cell's pointwise part: gates (N, 4H) and c (N, H) to [h, c] packed (N, 2H).");
}

}  // namespace

// The groups in a fixed order: the module's namespace, and so its stubs (scripts/python_stubs.sh),
// list the names in the order they are defined.
void bind_nn(nb::module_& m) {
  bind_convolutions(m);
  bind_pooling(m);
  bind_normalizations(m);
  bind_embeddings_and_dropout(m);
  bind_losses(m);
  bind_attention_and_recurrent(m);
}

}  // namespace loom::python

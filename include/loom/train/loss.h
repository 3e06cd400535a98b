#pragma once
// What train::Model takes as its loss: a function of (prediction, target) — a lambda, a LossFn,
// a loss of losses.h by name (train::mse, train::cross_entropy: their two-argument overloads) —
// or Keras' name for one ("mse", "sparse_categorical_crossentropy", ...).
//
//   train::Model a(graph, train::cross_entropy, optimizer);
//   train::Model b(graph, "sparse_categorical_crossentropy", "adam", {"accuracy"});
#include <concepts>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/train/train_step.h"

namespace loom::train {

class LOOM_API Loss {
 public:
  Loss() = default;
  // Any callable of (prediction, target) returning the loss tensor.
  template <class F>
    requires(std::is_invocable_r_v<Tensor, F&, const Tensor&, const Tensor&> && !std::is_convertible_v<F, std::string> &&
             !std::same_as<std::remove_cvref_t<F>, Loss>)
  Loss(F f) : fn_(std::move(f)) {}  // NOLINT: implicit, as a std::function parameter was
  // A function's name: an overload set resolves to its (prediction, target) overload here.
  Loss(Tensor (*f)(const Tensor&, const Tensor&));  // NOLINT
  // Keras' names (valid_names()); anything else throws ValueError listing them.
  Loss(const char* name);         // NOLINT
  Loss(const std::string& name);  // NOLINT

  Tensor operator()(const Tensor& prediction, const Tensor& target) const { return fn_(prediction, target); }
  explicit operator bool() const { return static_cast<bool>(fn_); }
  const LossFn& function() const { return fn_; }
  // The name it was given by ("" for a function).
  const std::string& name() const { return name_; }

  // Names and what they are: mse / mean_squared_error, mae / mean_absolute_error, huber /
  // huber_loss, sparse_categorical_crossentropy / categorical_crossentropy / cross_entropy
  // (cross_entropy on logits: class ids, or one-hot / probability targets of the logits'
  // shape), binary_crossentropy / binary_cross_entropy (on probabilities, Keras' default),
  // binary_cross_entropy_with_logits, nll_loss, kl_divergence, cosine.
  static std::vector<std::string> valid_names();

 private:
  LossFn fn_;
  std::string name_;
};

}  // namespace loom::train

// Losses by Keras' names (issue 36).
#include "loom/train/loss.h"

#include <utility>

#include "loom/core/error.h"
#include "loom/train/losses.h"

namespace loom::train {

namespace {

using LossPtr = Tensor (*)(const Tensor&, const Tensor&);

const std::vector<std::pair<std::string, LossPtr>>& table() {
  // Classification on logits under Keras' names as well: Loom's graphs end in logits (Keras
  // would need from_logits=True); binary_crossentropy takes probabilities, as Keras' default,
  // and refuses values outside [0, 1] with a pointer to the logits version.
  static const std::vector<std::pair<std::string, LossPtr>> t = {
      {"mse", &mse},
      {"mean_squared_error", &mse},
      {"mae", &mae},
      {"mean_absolute_error", &mae},
      {"huber", &huber},
      {"huber_loss", &huber},
      {"sparse_categorical_crossentropy", &cross_entropy},
      {"categorical_crossentropy", &cross_entropy},
      {"cross_entropy", &cross_entropy},
      {"binary_crossentropy", &binary_cross_entropy},
      {"binary_cross_entropy", &binary_cross_entropy},
      {"binary_cross_entropy_with_logits", &binary_cross_entropy_with_logits},
      {"nll_loss", &nll_loss},
      {"kl_divergence", &kl_divergence},
      {"cosine", &cosine},
  };
  return t;
}

}  // namespace

Loss::Loss(Tensor (*f)(const Tensor&, const Tensor&)) {
  if (f) fn_ = f;
}

Loss::Loss(const char* name) : Loss(std::string(name ? name : "")) {}

Loss::Loss(const std::string& name) : name_(name) {
  for (const auto& [n, f] : table())
    if (n == name) {
      fn_ = f;
      return;
    }
  std::string valid;
  for (const std::string& n : valid_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw ValueError("train::Loss: unknown loss '" + name + "' (valid: " + valid + ", or a function of (prediction, target))");
}

std::vector<std::string> Loss::valid_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : table()) names.push_back(n);
  return names;
}

}  // namespace loom::train

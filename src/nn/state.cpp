#include "loom/nn/state.h"

#include <unordered_set>

namespace loom::nn {

namespace {
template <typename V>
std::string names(const std::vector<std::pair<std::string, V>>& items) {
  std::string s;
  for (const auto& [k, v] : items) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}
}  // namespace

void State::add_param(const std::string& name, Tensor value) {
  if (has_param(name)) throw ValueError("State::add_param: '" + name + "' already exists");
  params_.emplace_back(name, std::move(value));
}

void State::add_buffer(const std::string& name, Tensor value) { buffers_.emplace_back(name, std::move(value)); }
void State::add_child(const std::string& name, std::shared_ptr<State> child) { children_.emplace_back(name, std::move(child)); }

bool State::has_param(const std::string& name) const {
  for (const auto& [k, v] : params_)
    if (k == name) return true;
  return false;
}

Tensor& State::param(const std::string& name) {
  for (auto& [k, v] : params_)
    if (k == name) return v;
  throw ValueError("State::param: no parameter '" + name + "' (parameters: " + names(params_) + ")");
}
const Tensor& State::param(const std::string& name) const { return const_cast<State*>(this)->param(name); }

Tensor& State::buffer(const std::string& name) {
  for (auto& [k, v] : buffers_)
    if (k == name) return v;
  throw ValueError("State::buffer: no buffer '" + name + "' (buffers: " + names(buffers_) + ")");
}

namespace {
// Tensors of `member` in a state tree, each once, named by their path.
std::vector<std::pair<std::string, Tensor>> collect(
    const State& root, const std::vector<std::pair<std::string, Tensor>>& (State::*member)() const) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto visit = [&](auto&& self, const State& s, const std::string& prefix) -> void {
    for (const auto& [k, v] : (s.*member)())
      if (seen.insert(v.impl().get()).second) out.emplace_back(prefix + k, v);
    for (const auto& [k, c] : s.children()) self(self, *c, prefix + k + "/");
  };
  visit(visit, root, "");
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> State::all_params() const { return collect(*this, &State::params); }
std::vector<std::pair<std::string, Tensor>> State::all_buffers() const { return collect(*this, &State::buffers); }

}  // namespace loom::nn

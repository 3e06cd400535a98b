#pragma once
// The state of a layer: named parameters (trainable) and buffers (not trained, e.g. running
// averages), and the states of inner layers for composite layers. Layers made with
// reuse_with hold the very same State object.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::nn {

class LOOM_API State {
 public:
  void add_param(const std::string& name, Tensor value);
  void add_buffer(const std::string& name, Tensor value);
  void add_child(const std::string& name, std::shared_ptr<State> child);
  bool has_param(const std::string& name) const;
  // The parameter or buffer `name`; throws ValueError listing the names that exist.
  Tensor& param(const std::string& name);
  const Tensor& param(const std::string& name) const;
  Tensor& buffer(const std::string& name);
  const std::vector<std::pair<std::string, Tensor>>& params() const { return params_; }
  const std::vector<std::pair<std::string, Tensor>>& buffers() const { return buffers_; }
  const std::vector<std::pair<std::string, std::shared_ptr<State>>>& children() const { return children_; }
  // Every trainable tensor of this state and its children ("child/name" paths), each once.
  std::vector<std::pair<std::string, Tensor>> all_params() const;
  // Every buffer of this state and its children, with the same paths.
  std::vector<std::pair<std::string, Tensor>> all_buffers() const;

 private:
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<State>>> children_;
};

}  // namespace loom::nn

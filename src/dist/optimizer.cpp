// Gradient averaging in buckets, and rank 0's state on every rank.
#include "loom/dist/optimizer.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "loom/autograd/autograd.h"
#include "loom/io/model.h"
#include "loom/ops/creation.h"
#include "loom/ops/manipulation.h"

namespace loom::dist {

namespace {

// A 64-bit FNV-1a of the names, to check that every rank holds the same set.
int64_t hash_names(const std::vector<std::string>& names) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& n : names) {
    for (unsigned char c : n) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator: {"ab", "c"} and {"a", "bc"} differ
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h);
}

// Text from `root` on every rank (its length first, then its bytes).
std::string broadcast_text(const std::string& text, int root) {
  Tensor len = scalar_tensor(static_cast<int64_t>(text.size()), Int64);
  broadcast(len, root);
  Tensor bytes = empty({len.item<int64_t>()}, UInt8);
  if (rank() == root && !text.empty()) std::copy(text.begin(), text.end(), bytes.data<uint8_t>());
  broadcast(bytes, root);
  const auto* p = bytes.numel() ? reinterpret_cast<const char*>(bytes.data<uint8_t>()) : "";
  return std::string(p, static_cast<size_t>(bytes.numel()));
}

}  // namespace

data::Shard shard(bool drop_tail) { return {.index = rank(), .count = size(), .drop_tail = drop_tail}; }

void broadcast_graph(const Graph& graph, int root) {
  const io::TensorMap state = io::graph_state(graph);  // by name: the same order on every rank
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  // max over ranks of the hash and of its complement: equal everywhere iff max == ~min
  const int64_t h = hash_names(names);
  Tensor hmax = tensor<int64_t>({h, ~h});
  allreduce(hmax, ReduceOp::Max);
  const bool same = hmax.to_vector<int64_t>()[0] == ~hmax.to_vector<int64_t>()[1];
  if (!same)
    throw ValueError("dist::broadcast_graph: the ranks' graphs hold different parameters and buffers (" +
                     std::to_string(names.size()) + " here); every rank must build the same model");
  for (const auto& [name, t] : state) {
    Tensor target = t;
    try {
      broadcast(target, root);
    } catch (const ShapeError& e) {
      throw ShapeError("dist::broadcast_graph: tensor '" + name + "': " + e.what());
    } catch (const DTypeError& e) {
      throw DTypeError("dist::broadcast_graph: tensor '" + name + "': " + e.what());
    }
  }
}

DistributedOptimizer::DistributedOptimizer(std::shared_ptr<train::Optimizer> optimizer, DistributedOptions options)
    : optimizer_(std::move(optimizer)), options_(options) {
  if (!optimizer_) throw ValueError("dist::DistributedOptimizer: the optimizer is null");
  if (options_.bucket_bytes < 1)
    throw ValueError("dist::DistributedOptimizer: bucket_bytes must be >= 1, got " + std::to_string(options_.bucket_bytes));
  size();  // DistError now, not at the first step, when no Context is alive
}

void DistributedOptimizer::broadcast_state(int root) {
  NoGrad no_grad;
  for (const Tensor& p : optimizer_->params()) {
    Tensor target = p;
    broadcast(target, root);
  }
  // The state's layout as text ("t key dtype ndim dims..", "c key value", "s key hexfloat"),
  // then its tensors in that order.
  const train::OptimizerState mine = optimizer_->state_dict();
  std::ostringstream layout;
  for (const auto& [key, t] : mine.tensors) {
    layout << "t " << key << ' ' << static_cast<int>(t.dtype()) << ' ' << t.ndim();
    for (int64_t d : t.shape()) layout << ' ' << d;
    layout << '\n';
  }
  for (const auto& [key, v] : mine.counters) layout << "c " << key << ' ' << v << '\n';
  for (const auto& [key, v] : mine.scalars) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);  // exact
    layout << "s " << key << ' ' << buf << '\n';
  }
  std::istringstream in(broadcast_text(layout.str(), root));
  train::OptimizerState state;
  std::string kind, key;
  while (in >> kind >> key) {
    if (kind == "t") {
      int dtype = 0;
      int64_t ndim = 0;
      in >> dtype >> ndim;
      Shape shape(static_cast<size_t>(ndim));
      for (int64_t& d : shape) in >> d;
      Tensor t = rank() == root ? mine.tensors.at(key) : empty(shape, static_cast<DType>(dtype));
      broadcast(t, root);
      state.tensors[key] = t;
    } else if (kind == "c") {
      in >> state.counters[key];
    } else {
      std::string hex;
      in >> hex;
      state.scalars[key] = std::strtod(hex.c_str(), nullptr);
    }
  }
  optimizer_->load_state_dict(state);
}

void DistributedOptimizer::average_gradients() {
  NoGrad no_grad;
  const std::vector<Tensor>& params = optimizer_->params();
  const int64_t n = static_cast<int64_t>(params.size());
  // which parameters have a gradient on some rank
  Tensor has = zeros({n}, Bool);
  for (int64_t i = 0; i < n; ++i) has.data<bool>()[i] = params[static_cast<size_t>(i)].grad().defined();
  allreduce(has, ReduceOp::Max);
  std::vector<Tensor> grads;
  for (int64_t i = 0; i < n; ++i) {
    if (!has.data<bool>()[i]) continue;
    const Tensor& p = params[static_cast<size_t>(i)];
    if (!p.grad().defined()) p.impl()->grad = zeros_like(p).impl();  // unused here: contributes zeros
    grads.push_back(p.grad());
  }
  // Buckets: consecutive gradients of one dtype up to bucket_bytes (at least one gradient).
  last_buckets_ = 0;
  for (size_t b = 0; b < grads.size();) {
    size_t e = b + 1;
    int64_t bytes = static_cast<int64_t>(grads[b].nbytes());
    while (e < grads.size() && grads[e].dtype() == grads[b].dtype() &&
           bytes + static_cast<int64_t>(grads[e].nbytes()) <= options_.bucket_bytes)
      bytes += static_cast<int64_t>(grads[e++].nbytes());
    ++last_buckets_;
    if (e == b + 1) {
      allreduce(grads[b], ReduceOp::Mean);  // in place when contiguous
    } else {
      std::vector<Tensor> flat;
      for (size_t i = b; i < e; ++i) flat.push_back(grads[i].reshape({-1}));
      Tensor bucket = concatenate(flat, 0);
      allreduce(bucket, ReduceOp::Mean);
      int64_t off = 0;
      for (size_t i = b; i < e; ++i) {
        const int64_t k = grads[i].numel();
        grads[i].copy_(bucket.index({Slice(off, off + k)}).reshape(grads[i].shape()));
        off += k;
      }
    }
    b = e;
  }
}

void DistributedOptimizer::step() {
  average_gradients();
  optimizer_->step();
}

}  // namespace loom::dist

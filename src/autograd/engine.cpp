// The backward pass: orders the recorded graph topologically from the output and runs each
// node's rule once, after all gradients flowing into it have been summed.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "loom/autograd/autograd.h"
#include "loom/autograd/hooks.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"

namespace loom {

namespace {

// Backward passes of several threads into the same leaves (Hogwild-style training, workers
// sharing weights): a leaf's .grad() is read and replaced or added into only under the lock of
// its stripe, and a pass takes the stripes of all its leaves, in their order (so two passes
// cannot deadlock), for its final assignment, where it sums its gradients into what .grad()
// holds then: no pass loses another's contribution. (A mutex per leaf would grow every tensor;
// 64 stripes keep unrelated passes mostly apart, and the assignment is a short add per leaf.)
constexpr size_t kLeafStripes = 64;
std::mutex& leaf_stripe(size_t s) {
  static auto* stripes = new std::array<std::mutex, kLeafStripes>;  // never destroyed, as the hooks' registry
  return (*stripes)[s];
}
size_t stripe_of(const TensorImpl* leaf) {
  const auto p = reinterpret_cast<uintptr_t>(leaf);
  return ((p >> 4) ^ (p >> 12)) % kLeafStripes;
}
std::shared_ptr<TensorImpl> read_grad(const TensorImpl& leaf) {
  const std::lock_guard lock(leaf_stripe(stripe_of(&leaf)));
  return leaf.grad;
}

// The leaf's new .grad() given the one it has (`current`, null for none) and a pass's
// gradient g: their sum, or g itself when it is a tensor of its own (a copy when it shares the
// leaf's memory, is recorded or is not contiguous).
Tensor summed_grad(const std::shared_ptr<TensorImpl>& current, const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) {
  if (current) return add(Tensor(current), g);
  if (g.shares_storage_with(Tensor(leaf)) || g.impl()->grad_fn || !g.is_contiguous()) return g.copy();
  return g;
}

}  // namespace

Tensor AccumulateGrad::accumulated(const Tensor& g) const {
  auto leaf = leaf_.lock();
  if (!leaf || !g.defined()) return Tensor();
  return summed_grad(read_grad(*leaf), leaf, g);
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& g) {
  auto leaf = leaf_.lock();
  if (!leaf || !g.defined()) return {};
  const std::lock_guard lock(leaf_stripe(stripe_of(leaf.get())));
  leaf->grad = summed_grad(leaf->grad, leaf, g).impl();
  return {};
}

namespace {

// The hooks by accumulator node: each registered node is kept alive by its handles, so its
// address is not reused while it is a key here.
using Hook = std::shared_ptr<const std::function<void(const Tensor&)>>;
struct HookRegistry {
  std::mutex mutex;
  std::unordered_map<const Node*, std::vector<std::pair<uint64_t, Hook>>> hooks;
  uint64_t next_id = 1;
  std::atomic<size_t> count{0};  // lets backward skip the lock when no hook exists
};
HookRegistry& registry() {
  static HookRegistry* r = new HookRegistry;  // never destroyed: handles may outlive statics
  return *r;
}

void run_hooks(const Node* node, const Tensor& grad) {
  HookRegistry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return;
  std::vector<Hook> todo;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.hooks.find(node);
    if (it == r.hooks.end()) return;
    for (const auto& [id, h] : it->second) todo.push_back(h);
  }
  for (const Hook& h : todo) {
    try {
      (*h)(grad);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw AutogradError(std::string("backward: a gradient hook (on_grad_accumulated) threw: ") + e.what());
    } catch (...) {
      throw AutogradError("backward: a gradient hook (on_grad_accumulated) threw an exception not derived from std::exception");
    }
  }
}

bool has_hooks(const Node* node) {
  HookRegistry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.hooks.count(node) > 0;
}

Tensor default_seed(const Tensor& out, const char* what) {
  if (out.numel() != 1)
    throw AutogradError(std::string(what) + ": the output has shape " + shape_str(out.shape()) +
                        "; a seed gradient of that shape is needed for non-scalar outputs");
  return ones(out.shape(), out.dtype(), out.device());
}

// Whether `sum`, a gradient being summed, may take `g` in place (bitwise add(sum, g)): the
// engine's handle is the only one to it and to its memory, so it is no user's tensor, no
// saved tensor, no other gradient nor a view of one (a rule may return its incoming gradient
// or a saved tensor, to several inputs too), and nothing else can see the write; a
// broadcast view (sum()'s gradient) cannot take a write.
bool engine_owns(const Tensor& sum) {
  return sum.impl().use_count() == 1 && sum.storage().use_count() == 1 && !sum.requires_grad() &&
         !has_internal_overlap(sum.shape(), sum.strides());
}
bool sole_holder(const Tensor& sum, const Tensor& g) {
  return engine_owns(sum) && sum.shape() == g.shape() && sum.dtype() == g.dtype();
}

// Lets a one-input rule add its gradient into the sum already pending for its input
// (Node::add_into) instead of returning a whole gradient to be added there.
bool added_into_pending(Node* n, const Tensor& g, std::unordered_map<Node*, Tensor>& pending) {
  if (n->next.size() != 1 || !n->next[0]) return false;
  auto it = pending.find(n->next[0].get());
  return it != pending.end() && it->second.defined() && engine_owns(it->second) && n->add_into(g, it->second);
}

// Whether a leaf's existing .grad() may take the pass's gradient g in place at the end of the
// pass, as PyTorch's AccumulateGrad does when nothing else holds it: no handle to it or its
// memory but the leaf's (a user's x.grad() keeps its values), and a += that allocates nothing
// (so that assigning the pass's gradients cannot fail half-way).
bool grad_takes_in_place(const std::shared_ptr<TensorImpl>& grad, const Tensor& g) {
  if (!grad || grad.use_count() != 1 || grad->storage.use_count() != 1) return false;
  const DType d = grad->dtype;
  return g.dtype() == d && g.shape() == grad->shape && g.device() == grad->storage->device() && d != DType::Float16 &&
         d != DType::BFloat16 && d != DType::Bool && !has_internal_overlap(grad->shape, grad->strides);
}

// A leaf's gradient from a pass (`contribution`), assigned once the pass has succeeded: added
// into .grad() (in_place) or summed with it into `grad`, which replaces it. A leaf with hooks
// has `grad` summed during the pass, from the .grad() it had then (`seen`), for its hooks.
struct Staged {
  std::shared_ptr<TensorImpl> leaf;
  Tensor contribution;
  Tensor grad{};
  std::shared_ptr<TensorImpl> seen{};
  bool hooked = false;
  bool in_place = false;
};

// Assigns the pass's gradients under their leaves' stripes: every new .grad() is summed first
// (which may allocate, and fail: then nothing is assigned), then all are assigned, which
// allocates nothing.
void assign_grads(std::vector<Staged>& staged) {
  std::vector<size_t> stripes;
  stripes.reserve(staged.size());
  for (const Staged& st : staged) stripes.push_back(stripe_of(st.leaf.get()));
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  std::vector<std::unique_lock<std::mutex>> held;
  held.reserve(stripes.size());
  for (size_t s : stripes) held.emplace_back(leaf_stripe(s));
  for (Staged& st : staged) {
    const std::shared_ptr<TensorImpl>& current = st.leaf->grad;
    const bool hooks_saw_it = st.hooked && current == st.seen;
    st.seen.reset();  // (a handle of ours would keep .grad() from being added into)
    if (hooks_saw_it) continue;  // `grad` is what the hooks were given
    // in place only when no one else holds .grad() or its memory (a hook may have taken it)
    st.in_place = !st.hooked && grad_takes_in_place(current, st.contribution);
    if (!st.in_place) st.grad = summed_grad(current, st.leaf, st.contribution);
  }
  for (Staged& st : staged) {
    if (!st.in_place) {
      st.leaf->grad = st.grad.impl();
      continue;
    }
    Tensor target(st.leaf->grad);
    target += st.contribution;
  }
}

// Runs the graph below `root`. With `capture`, gradients reaching the captured nodes are
// stored there instead of running those nodes.
// Without `retain`, each node's saved tensors are freed once it has run.
void run_backward(const Tensor& root, const Tensor& seed, std::unordered_map<Node*, Tensor>* capture, bool retain) {
  NoGrad no_grad;
  std::shared_ptr<Node> start = gradient_edge(root);
  if (!start) return;
  // dependency counts
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{start.get()};
  std::unordered_set<Node*> seen{start.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& nx : n->next) {
      if (!nx) continue;
      ++deps[nx.get()];
      if (seen.insert(nx.get()).second) stack.push_back(nx.get());
    }
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[start.get()] = seed;
  // the leaves' new gradients, assigned only after the whole pass succeeded (all or nothing)
  std::vector<Staged> staged;
  std::vector<Node*> ready{start.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(pending[n]);
    pending.erase(n);
    if (capture) {
      auto it = capture->find(n);
      if (it != capture->end()) {
        it->second = g;
        if (dynamic_cast<AccumulateGrad*>(n)) continue;
      }
    }
    std::vector<Tensor> grads;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      if (auto leaf = acc->leaf(); leaf && !capture && g.defined()) {
        Staged st{leaf, g};
        if (has_hooks(n)) {
          st.hooked = true;
          st.seen = read_grad(*leaf);
          st.grad = summed_grad(st.seen, leaf, g);
          run_hooks(n, st.grad);  // every contribution is in: the gradient is final
        }
        staged.push_back(std::move(st));
      }
    } else if (g.defined()) {
      if (!added_into_pending(n, g, pending)) grads = n->apply(g);
      if (!retain) n->release();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < grads.size() && grads[i].defined()) {
        auto& slot = pending[nx];
        if (!slot.defined()) slot = std::move(grads[i]);
        else if (sole_holder(slot, grads[i])) slot += grads[i];
        else slot = add(slot, grads[i]);
      }
      if (--deps[nx] == 0) ready.push_back(nx);
    }
  }
  assign_grads(staged);
}

}  // namespace

GradHookHandle& GradHookHandle::operator=(GradHookHandle&& o) noexcept {
  if (this != &o) {
    remove();
    id_ = o.id_;
    node_ = std::move(o.node_);
    o.id_ = 0;
  }
  return *this;
}

void GradHookHandle::remove() noexcept {
  if (id_ == 0) return;
  HookRegistry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.hooks.find(node_.get());
    if (it != r.hooks.end()) {
      auto& v = it->second;
      for (auto h = v.begin(); h != v.end(); ++h)
        if (h->first == id_) {
          v.erase(h);
          r.count.fetch_sub(1, std::memory_order_release);
          break;
        }
      if (v.empty()) r.hooks.erase(it);
    }
  }
  id_ = 0;
  node_.reset();
}

GradHookHandle on_grad_accumulated(const Tensor& leaf, std::function<void(const Tensor& grad)> hook) {
  if (!leaf.defined()) throw AutogradError("on_grad_accumulated: the tensor is undefined");
  if (!hook) throw AutogradError("on_grad_accumulated: the hook is empty");
  if (!leaf.requires_grad() || leaf.impl()->grad_fn)
    throw AutogradError("on_grad_accumulated: the tensor of shape " + shape_str(leaf.shape()) +
                        " is not a leaf that requires grad; hooks go on tensors marked with requires_grad_()");
  GradHookHandle handle;
  handle.node_ = gradient_edge(leaf);
  auto fn = std::make_shared<const std::function<void(const Tensor&)>>(std::move(hook));
  HookRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  handle.id_ = r.next_id++;
  r.hooks[handle.node_.get()].emplace_back(handle.id_, std::move(fn));
  r.count.fetch_add(1, std::memory_order_release);
  return handle;
}

void backward(const Tensor& output, const Tensor& seed, bool retain_graph) {
  if (!output.defined()) throw AutogradError("backward: the output tensor is undefined");
  if (!output.requires_grad())
    throw AutogradError("backward: the output does not require grad (no input was marked with requires_grad_(), "
                        "or it was computed under NoGrad)");
  Tensor s = seed.defined() ? seed : default_seed(output, "backward");
  if (s.shape() != output.shape())
    throw ShapeError("backward: the seed gradient has shape " + shape_str(s.shape()) + " but the output has " +
                     shape_str(output.shape()));
  run_backward(output, s.astype(output.dtype()), nullptr, retain_graph);
}

void Tensor::backward(const Tensor& seed) const { loom::backward(*this, seed); }

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& seed) {
  if (!output.defined()) throw AutogradError("grad: the output tensor is undefined");
  std::unordered_map<Node*, Tensor> capture;
  std::vector<std::shared_ptr<Node>> keep;  // holds accumulators alive during the pass
  for (const Tensor& t : inputs) {
    if (!t.requires_grad())
      throw AutogradError("grad: an input of shape " + shape_str(t.shape()) + " does not require grad");
    keep.push_back(gradient_edge(t));
    capture[keep.back().get()] = Tensor();
  }
  if (output.requires_grad()) {
    Tensor s = seed.defined() ? seed : default_seed(output, "grad");
    run_backward(output, s.astype(output.dtype()), &capture, true);
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor g = capture[keep[i].get()];
    out.push_back(g.defined() ? g : zeros_like(inputs[i]));
  }
  return out;
}

std::vector<Tensor> grad(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> xs;
  for (const Tensor& t : inputs) {
    Tensor x = t.detach();
    x.requires_grad_(true);
    xs.push_back(x);
  }
  Tensor y;
  {
    GradModeScope on(true);
    y = f(xs);
  }
  return grad(y, xs);
}

}  // namespace loom

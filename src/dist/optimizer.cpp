// Gradient averaging in buckets, and rank 0's state on every rank.
#include "loom/dist/optimizer.h"

#include "dist/buckets.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "loom/autograd/autograd.h"
#include "loom/io/model_file.h"
#include "loom/ops/creation.h"
#include "loom/train/model.h"

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

void broadcast_optimizer(train::Optimizer& optimizer, int root) {
  NoGrad no_grad;
  for (const Tensor& p : optimizer.params()) {
    Tensor target = p;
    broadcast(target, root);
  }
  // The state's layout as text ("t key dtype ndim dims..", "c key value", "s key hexfloat"),
  // then its tensors in that order.
  const train::OptimizerState mine = optimizer.state_dict();
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
  optimizer.load_state_dict(state);
}

double checked_timeout(double seconds, const char* who) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    throw ValueError(std::string(who) + ": collective_timeout must be a finite number of seconds >= 0 (0: wait forever), got " +
                     std::to_string(seconds));
  return seconds;
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
  if (!same) {
    // Name a tensor that differs: each rank compares its names with root's, and the first rank
    // that differs tells every rank what (so that every rank throws the same error).
    std::string joined;
    for (const std::string& n : names) joined += n + '\n';
    std::vector<std::string> theirs;
    std::istringstream in(broadcast_text(joined, root));
    for (std::string n; std::getline(in, n);) theirs.push_back(n);
    std::vector<std::string> extra, missing;  // names are sorted (io::TensorMap)
    std::set_difference(names.begin(), names.end(), theirs.begin(), theirs.end(), std::back_inserter(extra));
    std::set_difference(theirs.begin(), theirs.end(), names.begin(), names.end(), std::back_inserter(missing));
    const std::string r = "rank " + std::to_string(rank()), r0 = "rank " + std::to_string(root);
    const std::string diff = !extra.empty()   ? r + " has '" + extra[0] + "', which " + r0 + " has not"
                             : !missing.empty() ? r + " has no '" + missing[0] + "', which " + r0 + " has"
                                                : "";
    const auto differs = allgather(from_vector(std::vector<int64_t>{diff.empty() ? 0 : 1}, {1})).to_vector<int64_t>();
    int first = 0;
    while (first + 1 < size() && !differs[static_cast<size_t>(first)]) ++first;
    throw ValueError("dist::broadcast_graph: the ranks' models differ: " + broadcast_text(diff, first) +
                     " (a parameter or buffer); every rank must build the same model");
  }
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
  detail::set_collective_timeout(checked_timeout(options_.collective_timeout, "dist::DistributedOptimizer"), rank());
  buckets_ = std::make_unique<detail::GradientBuckets>(optimizer_->params(), options_.bucket_bytes, options_.overlap,
                                                       "dist::DistributedOptimizer");
}

DistributedOptimizer::~DistributedOptimizer() = default;

int64_t DistributedOptimizer::last_overlapped_count() const { return buckets_->started_in_backward(); }

void DistributedOptimizer::broadcast_state(int root) { broadcast_optimizer(*optimizer_, root); }

void DistributedOptimizer::average_gradients() {
  if (!buckets_->built_for(optimizer_->params()))  // parameters were added: rebuilt (collectively)
    buckets_ = std::make_unique<detail::GradientBuckets>(optimizer_->params(), options_.bucket_bytes, options_.overlap,
                                                         "dist::DistributedOptimizer");
  last_buckets_ = buckets_->average();
}

void DistributedOptimizer::step() {
  average_gradients();
  optimizer_->step();
}

namespace {

// Model::fit's data-parallel hooks over MPI (train::DataParallel).
class MpiDataParallel final : public train::DataParallel {
 public:
  explicit MpiDataParallel(DistributedOptions options) : options_(options), rank_(dist::rank()), size_(dist::size()) {
    if (options_.bucket_bytes < 1)
      throw ValueError("dist::data_parallel: bucket_bytes must be >= 1, got " + std::to_string(options_.bucket_bytes));
    checked_timeout(options_.collective_timeout, "dist::data_parallel");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void begin(train::Model& model, data::DataLoader& train) override {
    detail::set_collective_timeout(options_.collective_timeout, rank_);
    // An unsharded loader becomes this rank's shard (same options otherwise), at the start of
    // its epoch; one that is mid-epoch cannot be (its position counts whole-epoch batches).
    const data::Shard want = shard(train.options().shard.drop_tail);
    const data::Shard have = train.options().shard;
    const data::LoaderPosition pos = train.position();
    const bool reshard = size_ > 1 && have.count == 1;
    const bool can = !reshard || pos.batch == 0;
    if (reshard && can) {
      data::LoaderOptions o = train.options();
      o.shard = want;
      data::DataLoader sharded(train.dataset(), o);
      sharded.set_position({pos.epoch, 0});
      train = std::move(sharded);
    }
    // What every rank must agree on, gathered so that every rank throws the same error.
    const data::Shard now = train.options().shard;
    const std::vector<int64_t> mine{can ? 1 : 0, now.index, now.count, train.size(), model.epochs_done(),
                                    train.position().epoch, train.position().batch};
    const int64_t k = static_cast<int64_t>(mine.size());
    const Tensor all = allgather(from_vector(mine, {1, k}));
    const auto v = all.to_vector<int64_t>();
    auto at = [&](int r, int64_t i) { return v[static_cast<size_t>(r * k + i)]; };
    const std::string who = "Model::fit (data-parallel, " + std::to_string(size_) + " ranks): ";
    for (int r = 0; r < size_; ++r) {
      const std::string rank_r = "rank " + std::to_string(r);
      if (!at(r, 0))
        throw ValueError(who + rank_r + "'s training loader is not sharded and stands mid-epoch; shard it with "
                               "LoaderOptions::shard = dist::shard() before restoring its position, or start at a whole epoch");
      if (at(r, 1) != r || at(r, 2) != size_)
        throw ValueError(who + rank_r + "'s training loader is shard " + std::to_string(at(r, 1)) + " of " +
                         std::to_string(at(r, 2)) + "; valid: shard " + std::to_string(r) + " of " + std::to_string(size_) +
                         " (dist::shard()) or an unsharded loader");
    }
    const char* names[] = {"", "", "", "batches per epoch", "epochs done", "loader epoch", "loader batch"};
    for (int64_t i = 3; i < k; ++i)
      for (int r = 1; r < size_; ++r)
        if (at(r, i) != at(0, i))
          throw ValueError(who + "the ranks disagree on the " + names[i] + ": rank 0 has " + std::to_string(at(0, i)) + ", rank " +
                           std::to_string(r) + " has " + std::to_string(at(r, i)) +
                           "; every rank must train the same model on the same data from the same checkpoint");
    broadcast_graph(model.graph());
    broadcast_optimizer(model.optimizer(), 0);
    buckets_.reset();
    buckets_ = std::make_unique<detail::GradientBuckets>(model.optimizer().params(), options_.bucket_bytes, options_.overlap,
                                                         "Model::fit (data-parallel)");
  }

  void average_gradients(train::Optimizer& optimizer) override {
    if (!buckets_ || !buckets_->built_for(optimizer.params()))
      buckets_ = std::make_unique<detail::GradientBuckets>(optimizer.params(), options_.bucket_bytes, options_.overlap,
                                                           "Model::fit (data-parallel)");
    buckets_->average();
  }

  void end() noexcept override { buckets_.reset(); }  // no hooks outside fit

  void check_failures(std::exception_ptr failure) override {
    std::string what;
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        what = "an exception not derived from std::exception";
      }
    }
    // 0: fine; 1: failed; 2: failed only because a failed rank was not in the collective it
    // was in (the dist disagreement error): the first failure is reported, not that one.
    const int64_t mine = !failure ? 0 : what.find("dist: ranks disagree") != std::string::npos ? 2 : 1;
    Tensor all;
    for (;;) {
      try {
        all = allgather(from_vector(std::vector<int64_t>{mine}, {1}));
        break;
      } catch (const ValueError&) {
        // This rank failed before a collective that another rank is in (a synchronized batch
        // norm's): that rank got the disagreement error too and comes here next.
      }
    }
    const auto status = all.to_vector<int64_t>();
    int first = -1;
    for (int64_t want : {1, 2})
      for (int r = 0; r < size_ && first < 0; ++r)
        if (status[static_cast<size_t>(r)] == want) first = r;
    if (first < 0) return;
    if (buckets_) buckets_->abandon();  // every rank: the allreduces of this step's buckets end together
    const std::string message = broadcast_text(what, first);
    if (mine == 1) std::rethrow_exception(failure);
    throw DistError("Model::fit (data-parallel): rank " + std::to_string(first) + " failed, so every rank stops: " + message);
  }

  void average(std::vector<double>& values) override {
    if (values.empty()) return;
    Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
    allreduce(t, ReduceOp::Mean);
    values = t.to_vector<double>();
  }

 private:
  DistributedOptions options_;
  int rank_, size_;
  std::unique_ptr<detail::GradientBuckets> buckets_;
};

}  // namespace

std::shared_ptr<train::DataParallel> data_parallel(DistributedOptions options) {
  return std::make_shared<MpiDataParallel>(options);
}

}  // namespace loom::dist

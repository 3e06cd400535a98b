// Gradient buckets and their non-blocking allreduces (dist/buckets.h).
#include "dist/buckets.h"

#include <climits>

#include "loom/autograd/autograd.h"
#include "loom/dist/dist.h"
#include "loom/ops/creation.h"

namespace loom::dist::detail {

namespace {

// A 64-bit FNV-1a of the values, to check that every rank built the same buckets.
uint64_t mix(uint64_t h, int64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t version_of(const Tensor& t) { return t.defined() && t.storage() ? t.storage()->version() : 0; }

}  // namespace

GradientBuckets::GradientBuckets(std::vector<Tensor> params, int64_t bucket_bytes, bool overlap, std::string who)
    : params_(std::move(params)), who_(std::move(who)) {
  const size_t n = params_.size();
  bucket_of_.resize(n);
  got_.resize(n);
  got_version_.resize(n);
  uint64_t h = mix(1469598103934665603ull, static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params_[i];
    if (!p.defined() || !is_floating(p.dtype()))
      throw DTypeError(who_ + ": parameter " + std::to_string(i) + " is " +
                       (p.defined() ? std::string("of dtype ") + dtype_name(p.dtype()) : std::string("undefined")) +
                       "; gradients are averaged for floating parameters (float16, bfloat16, float32, float64)");
    if (p.numel() > INT_MAX)
      throw ValueError(who_ + ": parameter " + std::to_string(i) + " has " + std::to_string(p.numel()) +
                       " elements, over MPI's count limit of " + std::to_string(INT_MAX) + " per call");
    h = mix(mix(h, static_cast<int64_t>(p.dtype())), p.numel());
  }
  // every rank the same parameters (else the allreduces would mix up buffers)
  Tensor hs = tensor<int64_t>({static_cast<int64_t>(h), ~static_cast<int64_t>(h)});
  allreduce(hs, ReduceOp::Max);
  const auto v = hs.to_vector<int64_t>();
  if (v[0] != ~v[1])
    throw ValueError(who_ + ": the ranks' optimizers hold parameters of different dtypes or sizes (" + std::to_string(n) +
                     " here); every rank must train the same model");
  // reverse order: backward usually finishes the last parameters' gradients first
  for (size_t e = n; e > 0;) {
    Bucket b;
    int64_t bytes = 0, numel = 0;
    const DType dtype = params_[e - 1].dtype();
    while (e > 0 && params_[e - 1].dtype() == dtype) {
      const Tensor& p = params_[e - 1];
      const int64_t more = static_cast<int64_t>(p.nbytes());
      if (!b.members.empty() && (bytes + more > bucket_bytes || numel + p.numel() > INT_MAX)) break;
      b.members.push_back(e - 1);
      b.offsets.push_back(numel);
      bucket_of_[e - 1] = buckets_.size();
      bytes += more;
      numel += p.numel();
      --e;
    }
    b.flat = empty({numel}, dtype == Float64 ? Float64 : Float32);
    buckets_.push_back(std::move(b));
  }
  reset();
  if (overlap)
    for (size_t i = 0; i < n; ++i)
      if (params_[i].requires_grad() && !params_[i].impl()->grad_fn)
        hooks_.push_back(on_grad_accumulated(params_[i], [this, i](const Tensor& g) { on_ready(i, g); }));
}

GradientBuckets::~GradientBuckets() {
  hooks_.clear();
  if (in_progress()) abandon();
}

bool GradientBuckets::built_for(const std::vector<Tensor>& params) const {
  if (params.size() != params_.size()) return false;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].impl() != params_[i].impl()) return false;
  return true;
}

bool GradientBuckets::in_progress() const {
  if (next_ > 0 || dirty_) return true;
  for (const Tensor& g : got_)
    if (g.defined()) return true;
  return false;
}

void GradientBuckets::reset() {
  for (Bucket& b : buckets_) {
    b.remaining = static_cast<int>(b.members.size());
    b.started = b.early = false;
    b.request = MPI_REQUEST_NULL;
  }
  for (Tensor& g : got_) g = Tensor();
  next_ = 0;
  dirty_ = false;
  bad_ = -1;
}

void GradientBuckets::on_ready(size_t param, const Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool again = got_[param].defined();  // a second backward before average()
  got_[param] = grad;
  Bucket& mine = buckets_[bucket_of_[param]];
  if (again) {
    if (mine.started) dirty_ = true;  // its allreduce has the old value: average() redoes the round
    return;
  }
  --mine.remaining;
  // in index order only, so that every rank starts the same allreduces in the same order
  while (next_ < buckets_.size() && buckets_[next_].remaining == 0) start(buckets_[next_++], true);
  // let MPI progress the ones in flight (Open MPI advances non-blocking collectives in its calls)
  for (size_t b = 0; b < next_; ++b)
    if (buckets_[b].request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&buckets_[b].request, &done, MPI_STATUS_IGNORE);
      break;
    }
}

void GradientBuckets::start(Bucket& b, bool early) {
  for (size_t k = 0; k < b.members.size(); ++k) {
    const size_t i = b.members[k];
    const Tensor& p = params_[i];
    const Tensor g = early ? got_[i] : p.grad();
    Tensor slot = b.flat.index({Slice(b.offsets[k], b.offsets[k] + p.numel())});
    if (g.defined() && g.numel() == p.numel()) {
      slot.copy_(g.reshape({-1}));
      got_version_[i] = version_of(g);
    } else {
      if (g.defined() && bad_ < 0) bad_ = static_cast<int64_t>(i);  // reported in average(), on every rank
      slot.fill_(0.0);  // no gradient here: zeros
    }
  }
  const int64_t n = b.flat.numel();
  if (n > 0)
    check(MPI_Iallreduce(MPI_IN_PLACE, b.flat.data_ptr(), static_cast<int>(n), b.flat.dtype() == Float64 ? MPI_DOUBLE : MPI_FLOAT,
                         MPI_SUM, grad_comm(), &b.request),
          "MPI_Iallreduce", who_ + ": gradient bucket of " + std::to_string(n) + " elements");
  b.started = true;
  b.early = early;
}

void GradientBuckets::start_rest() {
  while (next_ < buckets_.size()) start(buckets_[next_++], false);
}

void GradientBuckets::wait_all() {
  for (Bucket& b : buckets_)  // a fixed order: index order
    if (b.request != MPI_REQUEST_NULL)
      check(MPI_Wait(&b.request, MPI_STATUS_IGNORE), "MPI_Wait", who_ + ": gradient bucket");
}

void GradientBuckets::abandon() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    start_rest();
    wait_all();
  } catch (...) {
    // MPI failed: nothing left to complete
  }
  reset();
}

int64_t GradientBuckets::average() {
  NoGrad no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = params_.size();
  int size = 0;
  check(MPI_Comm_size(grad_comm(), &size), "MPI_Comm_size", who_);
  int64_t early = 0;
  for (const Bucket& b : buckets_) early += b.early ? 1 : 0;
  try {
    start_rest();
    wait_all();
    // A gradient that is not the one its bucket started with (replaced or changed in place
    // after its hook, or the backward failed after it): the round is redone from the
    // gradients as they are now.
    for (const Bucket& b : buckets_)
      if (b.early)
        for (size_t i : b.members) {
          const Tensor g = params_[i].grad();
          if (g.impl() != got_[i].impl() || version_of(g) != got_version_[i]) dirty_ = true;
        }
    // per parameter: has a gradient here; then: redo, a gradient of the wrong size
    std::vector<uint8_t> flags(n + 2, 0);
    for (size_t i = 0; i < n; ++i) flags[i] = params_[i].grad().defined() ? 1 : 0;
    flags[n] = dirty_ ? 1 : 0;
    flags[n + 1] = bad_ >= 0 ? 1 : 0;
    check(MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_UINT8_T, MPI_MAX, grad_comm()),
          "MPI_Allreduce", who_ + ": gradient flags");
    if (flags[n]) {  // every rank redoes it: the decision is the reduced flag
      next_ = 0;
      bad_ = -1;
      for (Bucket& b : buckets_) b.early = false;
      early = 0;
      start_rest();
      wait_all();
      uint8_t bad = bad_ >= 0 ? 1 : 0;
      check(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UINT8_T, MPI_MAX, grad_comm()), "MPI_Allreduce",
            who_ + ": gradient flags");
      flags[n + 1] = bad;
    }
    if (flags[n + 1]) {
      const std::string where = bad_ >= 0 ? "parameter " + std::to_string(bad_) + " has a gradient of another size here"
                                          : "a gradient has another size than its parameter on another rank";
      throw ShapeError(who_ + ": " + where + "; a gradient must have its parameter's shape");
    }
    int64_t held = 0;
    for (Bucket& b : buckets_) {
      bool any = false;
      for (size_t i : b.members) any = any || flags[i];
      if (!any) continue;  // no gradient anywhere: these stay without
      ++held;
      const int64_t m = b.flat.numel();  // the mean: the sum divided by size, as allreduce(Mean)
      if (b.flat.dtype() == Float64) {
        auto* p = b.flat.data<double>();
        for (int64_t e = 0; e < m; ++e) p[e] /= size;
      } else {
        auto* p = b.flat.data<float>();
        for (int64_t e = 0; e < m; ++e) p[e] /= static_cast<float>(size);
      }
      for (size_t k = 0; k < b.members.size(); ++k) {
        const size_t i = b.members[k];
        if (!flags[i]) continue;
        const Tensor& p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) {  // a gradient elsewhere only: this rank's zeros, averaged
          g = empty_like(p);
          p.impl()->grad = g.impl();
        }
        g.copy_(b.flat.index({Slice(b.offsets[k], b.offsets[k] + p.numel())}).reshape(p.shape()));
      }
    }
    last_early_ = early;
    reset();
    return held;
  } catch (...) {
    last_early_ = 0;
    reset();
    throw;
  }
}

}  // namespace loom::dist::detail

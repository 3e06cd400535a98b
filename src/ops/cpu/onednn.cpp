// The oneDNN engine, streams and thread setting shared by the CPU backend's oneDNN paths.
#include "ops/cpu/onednn.h"

#include <omp.h>

#include <atomic>

#include "loom/core/parallel.h"
#include "ops/conv_fused.h"
#include "ops/internal.h"

namespace loom::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void use_omp_threads(int n) {
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

void follow_loom_threads() { use_omp_threads(get_num_threads()); }

const dnnl::primitive_attr& user_scratchpad() {
  static const dnnl::primitive_attr attr = [] {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return attr;
}

int batch_slices(int64_t n) {
  const int t = get_num_threads();
  return t > 1 && n >= t ? t : 1;
}

bool for_each_batch_slice(int64_t n, const std::function<bool(int, int64_t, int64_t, int)>& f) {
  const int t = batch_slices(n);
  if (t == 1) {
    follow_loom_threads();
    return f(0, 0, n, get_num_threads());
  }
  std::atomic<bool> ok{true};
  parallel_for(0, t, 1, [&](int64_t b, int64_t e) {
    use_omp_threads(1);
    for (int64_t s = b; s < e; ++s)
      if (!f(static_cast<int>(s), n * s / t, n * (s + 1) / t, 1)) ok = false;
  });
  return ok;
}

dnnl::memory staging(const dnnl::memory::desc& md, std::vector<Tensor>& keep) {
  if (md.get_size() == 0) return dnnl::memory(md, engine(), DNNL_MEMORY_NONE);  // e.g. no scratchpad
  keep.push_back(detail::alloc({static_cast<int64_t>(md.get_size())}, DType::UInt8, Device::cpu()));
  return dnnl::memory(md, engine(), keep.back().data_ptr());
}

bool PreparedCache::current(const Entry& e) {
  for (const Source& s : e.sources) {
    const std::shared_ptr<Storage> st = s.storage.lock();
    if (!st || st->version() != s.version) return false;
  }
  return true;
}

void PreparedCache::drop_stale() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (current(it->second)) {
      ++it;
    } else {
      bytes_ -= it->second.bytes;
      it = entries_.erase(it);
    }
  }
}

namespace {
// detail::PreparedWeightsNotKept scopes alive. Process-wide, not per thread: a convolution's
// batch slices prepare their weights on the pool's threads.
std::atomic<int> g_not_kept{0};
}  // namespace

std::vector<Tensor> PreparedCache::get(const std::string& tag, const std::vector<Tensor>& sources, const Build& build) {
  if (g_not_kept.load(std::memory_order_relaxed) > 0) return build();
  // the key names each source's storage, offset and version: a new version is a new key
  std::string key = tag;
  std::vector<Source> srcs;
  for (const Tensor& t : sources) {
    if (!t.defined()) {
      key += "|-";
      continue;
    }
    const Source s{t.storage(), t.offset(), t.storage()->version()};
    key += '|' + std::to_string(reinterpret_cast<uintptr_t>(t.storage().get())) + '@' + std::to_string(s.offset) +
           'v' + std::to_string(s.version);
    srcs.push_back(s);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    // a dead storage's address may be reused by a new one: the weak pointers tell them apart
    if (it != entries_.end() && current(it->second)) {
      bool same = true;
      for (size_t i = 0, j = 0; i < sources.size(); ++i)
        if (sources[i].defined() && it->second.sources[j++].storage.lock() != sources[i].storage()) same = false;
      if (same) return it->second.value;
    }
  }
  std::vector<Tensor> value = build();
  size_t nbytes = 0;
  for (const Tensor& t : value) nbytes += t.defined() ? t.nbytes() : 0;
  std::lock_guard<std::mutex> lock(mu_);
  drop_stale();
  if (nbytes > kMaxBytes) return value;
  if (bytes_ + nbytes > kMaxBytes) {
    entries_.clear();
    bytes_ = 0;
  }
  auto [it, inserted] = entries_.try_emplace(key);
  if (!inserted) bytes_ -= it->second.bytes;
  it->second = Entry{std::move(srcs), value, nbytes};
  bytes_ += nbytes;
  return value;
}

size_t PreparedCache::entries() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t PreparedCache::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void PreparedCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  bytes_ = 0;
}

PreparedCache& prepared_weights() {
  static PreparedCache cache;
  return cache;
}

}  // namespace loom::cpu::onednn

namespace loom::detail {
PreparedWeightsNotKept::PreparedWeightsNotKept() { ++cpu::onednn::g_not_kept; }
PreparedWeightsNotKept::~PreparedWeightsNotKept() { --cpu::onednn::g_not_kept; }
}  // namespace loom::detail

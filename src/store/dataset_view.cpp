// The lazy view of a dataset query's samples and the cache of decoded shards behind it.
#include <cstring>

#include "loom/ops/creation.h"
#include "store/datasets_impl.h"

namespace loom::store {

using detail::connection;
using detail::dataset_what;
using detail::open_session;
using detail::shape_text;

DatasetView::Shared::ShardPtr DatasetView::Shared::load(int64_t s) const {
  const std::string source = dataset_what(info.name, info.version) + " shard " + std::to_string(s);
  std::string stored;
  {  // the stored bytes under the store's lock (PostgreSQL keeps them in the database)
    Session session = open_session(*impl, Access::Read);
    stored = impl->blobs->stored(connection(session), shards[s], source);
  }
  const std::string bytes = impl->blobs->decode(shards[s], stored, source);  // verified: size and SHA-256
  auto map = std::make_shared<io::TensorMap>(io::decode_safetensors(bytes, nullptr, source));
  for (const FieldInfo& f : fields) {
    auto it = map->find(f.name);
    Shape expect{shard_samples[s]};
    expect.insert(expect.end(), f.shape.begin(), f.shape.end());
    if (it == map->end() || it->second.dtype() != f.dtype || it->second.shape() != expect)
      throw BlobError("store: " + source + " does not hold field '" + f.name + "' as " + io::safetensors_dtype_name(f.dtype) +
                      " " + shape_text(expect) + " as the version's rows say");
  }
  return map;
}

DatasetView::Shared::ShardPtr DatasetView::Shared::shard(int64_t s) {
  std::promise<ShardPtr> promise;
  std::shared_future<ShardPtr> future;
  bool mine = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(s);
    if (it != cache.end()) {
      lru.splice(lru.begin(), lru, it->second.at);
      future = it->second.shard;
    } else {
      mine = true;
      future = promise.get_future().share();
      lru.push_front(s);
      cache[s] = {future, lru.begin()};
      while (cache.size() > capacity) {  // a reader of an evicted shard keeps its future
        cache.erase(lru.back());
        lru.pop_back();
      }
    }
  }
  if (mine) {
    try {
      ++reads;
      promise.set_value(load(s));
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mutex);  // a failed read is not cached: the next asks again
      auto it = cache.find(s);
      if (it != cache.end()) {
        lru.erase(it->second.at);
        cache.erase(it);
      }
    }
  }
  return future.get();
}

DatasetView::DatasetView(std::shared_ptr<Shared> shared, std::vector<Entry> entries, std::vector<std::string> metadata,
                         std::vector<std::vector<std::string>> tags)
    : shared_(std::move(shared)), entries_(std::move(entries)), metadata_(std::move(metadata)), tags_(std::move(tags)) {}

DatasetView::~DatasetView() = default;

void DatasetView::check(int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError("DatasetView: sample " + std::to_string(i) + " is out of range for a view of " + std::to_string(size()) +
                     " samples of " + dataset_what(shared_->info.name, shared_->info.version));
}

data::Example DatasetView::get(int64_t i) const {
  check(i);
  const Entry& e = entries_[i];
  const Shared::ShardPtr shard = shared_->shard(e.shard);
  data::Example out;
  for (const FieldInfo& f : shared_->fields) {
    Tensor t = empty(f.shape, f.dtype, Device::cpu());
    const size_t row = t.nbytes();
    std::memcpy(t.data_ptr(), static_cast<const char*>(shard->at(f.name).data_ptr()) + e.position * row, row);
    out.push_back(std::move(t));
  }
  return out;
}

// One memcpy per sample and field into the batch's tensors; a shard is looked up once per run
// of consecutive samples from it.
data::Batch DatasetView::get_batch(const std::vector<int64_t>& indices) const {
  if (indices.empty()) throw ValueError("DatasetView::get_batch: no indices");
  for (int64_t i : indices) check(i);
  const int64_t n = static_cast<int64_t>(indices.size());
  const size_t nf = shared_->fields.size();
  data::Batch out;
  std::vector<char*> dst(nf);
  std::vector<size_t> row(nf);
  for (size_t k = 0; k < nf; ++k) {
    const FieldInfo& f = shared_->fields[k];
    Shape shape{n};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    out.push_back(empty(shape, f.dtype, Device::cpu()));
    dst[k] = static_cast<char*>(out.back().data_ptr());
    row[k] = static_cast<size_t>(shape_numel(f.shape)) * loom::itemsize(f.dtype);
  }
  int64_t current = -1;
  Shared::ShardPtr shard;
  std::vector<const char*> src(nf);
  for (int64_t b = 0; b < n; ++b) {
    const Entry& e = entries_[indices[b]];
    if (e.shard != current) {
      shard = shared_->shard(e.shard);
      current = e.shard;
      for (size_t k = 0; k < nf; ++k) src[k] = static_cast<const char*>(shard->at(shared_->fields[k].name).data_ptr());
    }
    for (size_t k = 0; k < nf; ++k) std::memcpy(dst[k] + b * row[k], src[k] + e.position * row[k], row[k]);
  }
  return out;
}

const DatasetInfo& DatasetView::info() const { return shared_->info; }
const std::vector<FieldInfo>& DatasetView::fields() const { return shared_->fields; }
int64_t DatasetView::index(int64_t i) const {
  check(i);
  return entries_[i].index;
}
const std::string& DatasetView::metadata(int64_t i) const {
  check(i);
  return metadata_[i];
}
const std::vector<std::string>& DatasetView::tags(int64_t i) const {
  check(i);
  return tags_[i];
}
int64_t DatasetView::shard_reads() const { return shared_->reads.load(); }

Sample DatasetView::sample(int64_t i) const {
  check(i);
  Sample s;
  const data::Example ex = get(i);
  for (size_t k = 0; k < ex.size(); ++k) s.tensors.emplace(shared_->fields[k].name, ex[k]);
  s.metadata = metadata_[i];
  s.tags = tags_[i];
  return s;
}

}  // namespace loom::store

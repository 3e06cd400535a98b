#include "loom/store/datasets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/data/csv.h"
#include "loom/data/idx.h"
#include "loom/data/npy.h"
#include "loom/io/safetensors.h"
#include "loom/ops/creation.h"
#include "store/query.h"
#include "store/store_impl.h"

namespace loom::store {

using detail::Row;
using detail::connection;
using detail::open_session;
using detail::Value;
using detail::now_ms;
using nlohmann::json;

namespace {

constexpr int64_t kShardBytes = 4 << 20;   // the default shard's size: one read serves thousands of MNIST samples
constexpr int64_t kMaxShardSamples = 1 << 20;

std::vector<std::string> tag_set(const char* op, std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  for (const std::string& t : tags) check_label(op, "tag", t);
  return tags;
}

std::string what(const std::string& name, int64_t version) { return "dataset '" + name + "' version " + std::to_string(version); }

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string fields_json(const std::vector<FieldInfo>& fields) {
  json j = json::array();
  for (const FieldInfo& f : fields) j.push_back({{"name", f.name}, {"dtype", io::safetensors_dtype_name(f.dtype)}, {"shape", f.shape}});
  return j.dump();
}

std::vector<FieldInfo> parse_fields(const std::string& text, const std::string& source) {
  std::string error;
  const std::optional<json> j = loom::detail::parse_json(text, &error);
  auto bad = [&] { return StoreError("store: " + source + " has a malformed field list in its row: " + text); };
  if (!j || !j->is_array()) throw bad();
  std::vector<FieldInfo> out;
  for (const json& f : *j) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("dtype") || !f["dtype"].is_string() ||
        !f.contains("shape") || !f["shape"].is_array())
      throw bad();
    FieldInfo fi;
    fi.name = f["name"].get<std::string>();
    const std::optional<DType> dt = io::dtype_from_safetensors(f["dtype"].get<std::string>());
    if (!dt) throw bad();
    fi.dtype = *dt;
    for (const json& d : f["shape"]) {
      const std::optional<int64_t> v = loom::detail::json_to_int(d, 0, int64_t(1) << 40);
      if (!v) throw bad();
      fi.shape.push_back(*v);
    }
    out.push_back(std::move(fi));
  }
  return out;
}

constexpr const char* kInfoColumns =
    "SELECT d.id, d.name, d.version, d.created_ms, d.fields, d.samples, d.shards, d.task_id, d.run_id FROM datasets d";

DatasetInfo info_of(detail::Connection& conn, const Row& r) {
  DatasetInfo info;
  info.name = r.text(1);
  info.version = r.integer(2);
  info.created_ms = r.integer(3);
  info.fields = parse_fields(r.text(4), what(info.name, info.version));
  info.samples = r.integer(5);
  info.shards = r.integer(6);
  info.produced_by = {r.is_null(7) ? 0 : r.integer(7), r.is_null(8) ? 0 : r.integer(8)};
  for (const Row& t : conn.query("SELECT tag FROM dataset_tags WHERE dataset_id = ? ORDER BY tag", {r.integer(0)}))
    info.tags.push_back(t.text(0));
  return info;
}

std::vector<DatasetInfo> infos(detail::Connection& conn, const std::string& sql, const std::vector<Value>& params) {
  std::vector<DatasetInfo> out;
  for (const Row& r : conn.query(sql, params)) out.push_back(info_of(conn, r));
  return out;
}

std::string versions_help(detail::Connection& conn, const std::string& name) {
  const std::vector<Row> rows =
      conn.query("SELECT MIN(version), MAX(version), COUNT(*) FROM datasets WHERE name = ? AND committed = 1", {name});
  if (rows.empty() || rows[0].integer(2) == 0) return "there is no committed dataset '" + name + "'";
  return "'" + name + "' has " + std::to_string(rows[0].integer(2)) + " version(s) from " + std::to_string(rows[0].integer(0)) +
         " to " + std::to_string(rows[0].integer(1));
}

// The id of a committed version, in the caller's transaction; NotFoundError otherwise.
Row committed_row(detail::Connection& conn, const std::string& name, int64_t version) {
  std::vector<Row> rows =
      conn.query(std::string(kInfoColumns) + " WHERE d.name = ? AND d.version = ? AND d.committed = 1", {name, version});
  if (rows.empty()) throw NotFoundError("store: no " + what(name, version) + ": " + versions_help(conn, name));
  return std::move(rows[0]);
}

// In the caller's write session: deletes a version (committed or draft) and releases its
// shards. Returns the blobs no row references any more, whose bytes go after the commit
// (detail::remove_unreferenced; src/store/blobs.h says why).
std::vector<std::string> delete_version(detail::StoreImpl& impl, detail::Connection& conn, int64_t id) {
  std::vector<std::string> blobs, freed;
  for (const Row& r : conn.query("SELECT blob FROM dataset_shards WHERE dataset_id = ?", {id})) blobs.push_back(r.text(0));
  conn.execute("DELETE FROM datasets WHERE id = ?", {id});  // shards, samples, metadata and tags cascade
  for (const std::string& b : blobs)
    if (impl.blobs->release(conn, b)) freed.push_back(b);
  return freed;
}

// A top-level scalar of a sample's metadata, as indexed in dataset_sample_meta.
struct MetaScalar {
  std::string key;
  std::optional<double> num;
  std::optional<std::string> str;
};

// Parses and checks a sample's metadata; returns its canonical text and its scalars.
std::string check_metadata(const std::string& text, std::vector<MetaScalar>& scalars) {
  std::string error;
  const std::optional<json> j = loom::detail::parse_json(text, &error);
  if (!j || !j->is_object())
    throw ValueError("append: the sample's metadata is not a JSON object" + (j ? std::string() : ": " + error) +
                     " (valid: e.g. {\"label\": 3})");
  // Non-finite numbers cannot round-trip through JSON (nlohmann parses 1e999 as infinity).
  std::vector<const json*> stack{&*j};
  while (!stack.empty()) {
    const json* v = stack.back();
    stack.pop_back();
    if (v->is_number_float() && !std::isfinite(v->get<double>()))
      throw ValueError("append: the sample's metadata holds a non-finite number (valid: finite numbers only)");
    if (v->is_structured())
      for (const json& c : *v) stack.push_back(&c);
  }
  for (const auto& [k, v] : j->items()) {
    check_label("append", "metadata key", k);
    if (v.is_number()) scalars.push_back({k, v.get<double>(), std::nullopt});
    else if (v.is_boolean()) scalars.push_back({k, v.get<bool>() ? 1.0 : 0.0, std::nullopt});
    else if (v.is_string()) {
      // Indexed as text, which PostgreSQL cannot hold with a NUL: refused on every backend
      // alike (nested strings stay in the metadata's JSON text, where it is "\u0000").
      if (v.get_ref<const std::string&>().find('\0') != std::string::npos)
        throw ValueError("append: the sample's metadata value of key " + loom::detail::quote_text(k) +
                         " is a string holding U+0000 (valid: top-level strings without NUL characters; nested values may hold them)");
      scalars.push_back({k, std::nullopt, v.get<std::string>()});
    }
  }
  return j->dump();
}

}  // namespace

// ---------------------------------------------------------------- the view and its shards

struct DatasetView::Shared {
  using ShardPtr = std::shared_ptr<const io::TensorMap>;
  std::shared_ptr<detail::StoreImpl> impl;  // the blob directory
  DatasetInfo info;
  std::vector<FieldInfo> fields;            // the selected fields, in order
  std::vector<detail::BlobRef> shards;
  std::vector<int64_t> shard_samples;
  size_t capacity = 16;

  std::mutex mutex;
  std::list<int64_t> lru;  // most recent first
  struct Slot {
    std::shared_future<ShardPtr> shard;
    std::list<int64_t>::iterator at;
  };
  std::unordered_map<int64_t, Slot> cache;
  std::atomic<int64_t> reads{0};

  ShardPtr load(int64_t s) const {
    const std::string source = what(info.name, info.version) + " shard " + std::to_string(s);
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

  // The decoded shard, read once however many workers ask for it at the same time.
  ShardPtr shard(int64_t s) {
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
};


DatasetView::DatasetView(std::shared_ptr<Shared> shared, std::vector<Entry> entries, std::vector<std::string> metadata,
                         std::vector<std::vector<std::string>> tags)
    : shared_(std::move(shared)), entries_(std::move(entries)), metadata_(std::move(metadata)), tags_(std::move(tags)) {}

DatasetView::~DatasetView() = default;

void DatasetView::check(int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError("DatasetView: sample " + std::to_string(i) + " is out of range for a view of " + std::to_string(size()) +
                     " samples of " + what(shared_->info.name, shared_->info.version));
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
    row[k] = static_cast<size_t>(numel_of(f.shape)) * loom::itemsize(f.dtype);
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

// ---------------------------------------------------------------- the writer

struct DatasetWriter::State {
  std::shared_ptr<detail::StoreImpl> impl;
  std::string name;
  int64_t version = 0, id = 0;
  std::vector<std::string> order;   // requested field order (empty: the first sample's, sorted)
  std::vector<FieldInfo> fields;    // fixed by the first sample
  std::vector<size_t> row_bytes;
  std::vector<std::string> tags;
  int64_t shard_samples = 0;        // 0: chosen from the first sample's size
  Provenance produced_by;
  // The shard being filled.
  std::vector<std::string> buffers;  // per field
  struct Pending {
    std::string metadata;
    std::vector<MetaScalar> scalars;
    std::vector<std::string> tags;
  };
  std::vector<Pending> pending;
  int64_t flushed = 0, shards = 0;
  bool done = false;

  std::string source() const { return what(name, version); }

  void flush() {
    if (pending.empty()) return;
    const int64_t n = static_cast<int64_t>(pending.size());
    io::TensorMap tensors;
    for (size_t k = 0; k < fields.size(); ++k) {
      Shape shape{n};
      shape.insert(shape.end(), fields[k].shape.begin(), fields[k].shape.end());
      tensors.emplace(fields[k].name, from_data(buffers[k].data(), shape, fields[k].dtype, Device::cpu()));
    }
    // Encoded, hashed and compressed before the lock.
    const detail::PreparedBlob blob = detail::prepare_blob(io::encode_safetensors(tensors));
    Session session = open_session(*impl, Access::Write);
    detail::Connection& conn = connection(session);
    impl->blobs->add_ref(conn, blob);  // durable before the rows commit
    conn.execute("INSERT INTO dataset_shards (dataset_id, shard, blob, samples) VALUES (?, ?, ?, ?)", {id, shards, blob.sha256, n});
    for (int64_t p = 0; p < n; ++p) {
      const Pending& s = pending[p];
      const int64_t idx = flushed + p;
      conn.execute("INSERT INTO dataset_samples (dataset_id, idx, shard, position, metadata) VALUES (?, ?, ?, ?, ?)",
                   {id, idx, shards, p, s.metadata});
      for (const MetaScalar& m : s.scalars)
        conn.execute("INSERT INTO dataset_sample_meta (dataset_id, idx, mkey, num, str) VALUES (?, ?, ?, ?, ?)",
                     {id, idx, m.key, m.num ? Value(*m.num) : Value(), m.str ? Value(*m.str) : Value()});
      for (const std::string& t : s.tags)
        conn.execute("INSERT INTO dataset_sample_tags (dataset_id, idx, tag) VALUES (?, ?, ?)", {id, idx, t});
    }
    conn.execute("UPDATE datasets SET fields = ?, samples = ?, shards = ? WHERE id = ?",
                 {fields_json(fields), flushed + n, shards + 1, id});
    session.commit();
    flushed += n;
    ++shards;
    pending.clear();
    for (std::string& b : buffers) b.clear();
  }
};

DatasetWriter::DatasetWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
DatasetWriter::DatasetWriter(DatasetWriter&&) noexcept = default;

DatasetWriter::~DatasetWriter() {
  if (!state_ || state_->done) return;
  try {
    abort();
  } catch (...) {  // a destructor must not throw: the draft stays for remove_drafts()
  }
}

int64_t DatasetWriter::size() const { return state_->flushed + static_cast<int64_t>(state_->pending.size()); }
int64_t DatasetWriter::version() const { return state_->version; }

void DatasetWriter::append(const Sample& sample) {
  State& st = *state_;
  if (st.done) throw ValueError("append: " + st.source() + " is already committed or aborted");
  const char* op = "append";
  // Everything is checked before the writer changes.
  std::vector<std::string> tags = tag_set(op, sample.tags);
  std::vector<MetaScalar> scalars;
  std::string metadata;
  try {
    metadata = check_metadata(sample.metadata, scalars);
  } catch (const ValueError& e) {
    throw ValueError(std::string(e.what()) + " (sample " + std::to_string(size()) + " of " + st.source() + ")");
  }
  std::vector<FieldInfo> fields = st.fields;
  if (fields.empty()) {
    std::vector<std::string> order = st.order;
    if (order.empty())
      for (const auto& [k, t] : sample.tensors) order.push_back(k);
    for (const std::string& f : order) {
      auto it = sample.tensors.find(f);
      if (it == sample.tensors.end())
        throw ValueError("append: the sample has no tensor '" + f + "' (the fields of " + st.source() + ")");
      if (!it->second.defined()) throw ValueError("append: tensor '" + f + "' of the sample is undefined");
      fields.push_back({f, it->second.dtype(), it->second.shape()});
    }
    if (fields.empty()) throw ValueError("append: the sample has no tensors");
  }
  std::string names;
  for (const FieldInfo& f : fields) names += (names.empty() ? "" : ", ") + f.name;
  for (const auto& [k, t] : sample.tensors)
    if (std::none_of(fields.begin(), fields.end(), [&k = k](const FieldInfo& f) { return f.name == k; }))
      throw ValueError("append: the sample has a tensor '" + k + "' that is not a field of " + st.source() + " (fields: " + names + ")");
  std::vector<Tensor> values;
  for (const FieldInfo& f : fields) {
    auto it = sample.tensors.find(f.name);
    if (it == sample.tensors.end())
      throw ValueError("append: the sample has no tensor '" + f.name + "' (fields of " + st.source() + ": " + names + ")");
    const Tensor& t = it->second;
    if (!t.defined()) throw ValueError("append: tensor '" + f.name + "' of the sample is undefined");
    if (t.dtype() != f.dtype)
      throw DTypeError("append: tensor '" + f.name + "' of sample " + std::to_string(size()) + " is " +
                       io::safetensors_dtype_name(t.dtype()) + ", the field is " + io::safetensors_dtype_name(f.dtype) + " in " +
                       st.source());
    if (t.shape() != f.shape)
      throw ShapeError("append: tensor '" + f.name + "' of sample " + std::to_string(size()) + " has shape " +
                       shape_text(t.shape()) + ", the field has shape " + shape_text(f.shape) + " in " + st.source());
    values.push_back(t.to(Device::cpu()).contiguous());
  }
  if (st.fields.empty()) {
    st.fields = fields;
    st.buffers.assign(fields.size(), {});
    int64_t total = 0;
    for (const Tensor& v : values) {
      st.row_bytes.push_back(v.nbytes());
      total += static_cast<int64_t>(v.nbytes());
    }
    if (st.shard_samples == 0) st.shard_samples = std::clamp<int64_t>(kShardBytes / std::max<int64_t>(total, 1), 1, kMaxShardSamples);
  }
  for (size_t k = 0; k < values.size(); ++k)
    st.buffers[k].append(static_cast<const char*>(values[k].data_ptr()), values[k].nbytes());
  st.pending.push_back({std::move(metadata), std::move(scalars), std::move(tags)});
  if (static_cast<int64_t>(st.pending.size()) >= st.shard_samples) st.flush();
}

DatasetInfo DatasetWriter::commit() {
  State& st = *state_;
  if (st.done) throw ValueError("commit: " + st.source() + " is already committed or aborted");
  if (size() == 0) throw ValueError("commit: " + st.source() + " has no samples (append some, or abort it)");
  st.flush();
  const int64_t created = now_ms();
  {
    Session session = open_session(*st.impl, Access::Write);
    connection(session).execute("UPDATE datasets SET committed = 1, created_ms = ? WHERE id = ?", {created, st.id});
    session.notify(kDatasetVersionChannel);  // wakes stream controllers (loom/flow/controllers.h)
    session.commit();
  }
  st.done = true;
  DatasetInfo info;
  info.name = st.name;
  info.version = st.version;
  info.created_ms = created;
  info.samples = st.flushed;
  info.shards = st.shards;
  info.fields = st.fields;
  info.tags = st.tags;
  info.produced_by = st.produced_by;
  return info;
}

void DatasetWriter::abort() {
  State& st = *state_;
  if (st.done) return;
  st.done = true;
  std::vector<std::string> freed;
  {
    Session session = open_session(*st.impl, Access::Write);
    freed = delete_version(*st.impl, connection(session), st.id);
    session.commit();
  }
  detail::remove_unreferenced(*st.impl, freed);
}

// ---------------------------------------------------------------- Datasets

Datasets::Datasets(std::shared_ptr<detail::StoreImpl> impl) : impl_(std::move(impl)) {}

DatasetWriter Datasets::create(const std::string& name, const DatasetOptions& options) {
  check_label("create", "dataset name", name);
  std::vector<std::string> tags = tag_set("create", options.tags);
  std::vector<std::string> seen;
  for (const std::string& f : options.fields) {
    check_label("create", "field name", f);
    if (f == "__metadata__") throw ValueError("create: '__metadata__' is reserved (safetensors) and cannot name a field");
    if (std::find(seen.begin(), seen.end(), f) != seen.end()) throw ValueError("create: field '" + f + "' is listed twice");
    seen.push_back(f);
  }
  if (options.shard_samples < 0 || options.shard_samples > kMaxShardSamples)
    throw ValueError("create: shard_samples is " + std::to_string(options.shard_samples) + " (valid: 0 for the default, or 1 to " +
                     std::to_string(kMaxShardSamples) + ")");
  auto st = std::make_unique<DatasetWriter::State>();
  st->impl = impl_;
  st->name = name;
  st->order = options.fields;
  st->tags = tags;
  st->shard_samples = options.shard_samples;
  st->produced_by = options.produced_by;
  detail::check_provenance_ids("create", options.produced_by);
  Session session = open_session(*impl_, Access::Write);
  detail::Connection& conn = connection(session);
  detail::check_provenance(conn, "create", options.produced_by);
  st->version = conn.query("INSERT INTO dataset_names (name, last_version) VALUES (?, 1) ON CONFLICT (name) "
                           "DO UPDATE SET last_version = dataset_names.last_version + 1 RETURNING last_version",
                           {name})[0]
                    .integer(0);
  st->id = conn.query("INSERT INTO datasets (name, version, created_ms, committed, fields, samples, shards, task_id, run_id) "
                      "VALUES (?, ?, ?, 0, '[]', 0, 0, ?, ?) RETURNING id",
                      {name, st->version, now_ms(), options.produced_by.task_id ? Value(options.produced_by.task_id) : Value(),
                       options.produced_by.run_id ? Value(options.produced_by.run_id) : Value()})[0]
               .integer(0);
  for (const std::string& t : tags) conn.execute("INSERT INTO dataset_tags (dataset_id, tag) VALUES (?, ?)", {st->id, t});
  session.commit();
  return DatasetWriter(std::move(st));
}

namespace {

// The JSON text of element i of a 1-D tensor (integers stay integers).
std::string scalar_text(const Tensor& t, int64_t i) {
  if (t.dtype() == Int64) return std::to_string(static_cast<const int64_t*>(t.data_ptr())[i]);
  const double v = t[i].item<double>();
  if (!is_floating(t.dtype())) return std::to_string(static_cast<int64_t>(v));
  if (!std::isfinite(v)) return "NaN";  // refused by append as not a JSON object
  return loom::detail::json_float_text(v);
}

// Samples from arrays sharing their first dimension (one field each), as one version.
DatasetInfo import_arrays(Datasets& ds, const char* op, const std::string& name,
                          const std::vector<std::pair<std::string, Tensor>>& arrays, const ImportOptions& options) {
  if (arrays.empty()) throw ValueError(std::string(op) + ": no arrays to import");
  const int64_t n = arrays[0].second.ndim() > 0 ? arrays[0].second.shape()[0] : -1;
  for (const auto& [f, t] : arrays)
    if (t.ndim() == 0 || t.shape()[0] != n)
      throw ShapeError(std::string(op) + ": array '" + f + "' has shape " + shape_text(t.shape()) + ", '" + arrays[0].first +
                       "' has shape " + shape_text(arrays[0].second.shape()) + " (valid: the same first dimension, one sample each)");
  std::vector<std::pair<std::string, Tensor>> meta;  // metadata key, 1-D values
  for (const auto& [field, key] : options.metadata) {
    check_label(op, "metadata key", key);
    auto it = std::find_if(arrays.begin(), arrays.end(), [&field = field](const auto& a) { return a.first == field; });
    if (it == arrays.end()) throw ValueError(std::string(op) + ": metadata names field '" + field + "', which is not imported");
    if (it->second.ndim() != 1)
      throw ShapeError(std::string(op) + ": field '" + field + "' has shape " + shape_text(it->second.shape()) +
                       ": only a scalar per sample can go into metadata");
    meta.emplace_back(key, it->second.to(Device::cpu()).contiguous());
  }
  DatasetOptions opts;
  for (const auto& a : arrays) opts.fields.push_back(a.first);
  opts.tags = options.tags;
  opts.shard_samples = options.shard_samples;
  opts.produced_by = options.produced_by;
  DatasetWriter w = ds.create(name, opts);  // aborted by its destructor if anything below throws
  std::vector<Tensor> columns;
  for (const auto& a : arrays) columns.push_back(a.second.to(Device::cpu()).contiguous());
  for (int64_t i = 0; i < n; ++i) {
    Sample s;
    for (size_t k = 0; k < arrays.size(); ++k) s.tensors.emplace(arrays[k].first, columns[k][i]);
    if (!meta.empty()) {
      s.metadata = "{";
      for (size_t k = 0; k < meta.size(); ++k)
        s.metadata += (k ? "," : "") + json(meta[k].first).dump() + ":" + scalar_text(meta[k].second, i);
      s.metadata += "}";
    }
    w.append(s);
  }
  return w.commit();
}

}  // namespace

DatasetInfo Datasets::import_idx(const std::string& name, const std::string& images_path, const std::string& labels_path,
                                 const ImportOptions& options) {
  std::vector<std::pair<std::string, Tensor>> arrays{{"x", data::read_idx(images_path)}};
  ImportOptions opts = options;
  if (!labels_path.empty()) {
    arrays.emplace_back("y", data::read_idx(labels_path));
    opts.metadata.emplace("y", "label");
  }
  return import_arrays(*this, "import_idx", name, arrays, opts);
}

DatasetInfo Datasets::import_npy(const std::string& name, const std::map<std::string, std::string>& field_paths,
                                 const ImportOptions& options) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [field, path] : field_paths) arrays.emplace_back(field, data::load_npy(path));
  return import_arrays(*this, "import_npy", name, arrays, options);
}

DatasetInfo Datasets::import_csv(const std::string& name, const std::string& path,
                                 const std::map<std::string, std::vector<std::string>>& field_columns, const ImportOptions& options,
                                 DType dtype, char delimiter) {
  if (field_columns.empty()) throw ValueError("import_csv: no fields (valid: e.g. {{\"x\", {\"a\", \"b\"}}, {\"y\", {\"label\"}}})");
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto& [field, columns] : field_columns) {
    if (columns.empty()) throw ValueError("import_csv: field '" + field + "' names no columns");
    data::CsvOptions csv;
    csv.delimiter = delimiter;
    csv.names = columns;
    csv.dtype = dtype;
    Tensor t = data::read_csv(path, csv);
    if (columns.size() == 1) t = t.reshape({t.shape()[0]});
    arrays.emplace_back(field, t);
  }
  return import_arrays(*this, "import_csv", name, arrays, options);
}

std::vector<std::string> Datasets::names() const {
  Session session = open_session(*impl_, Access::Read);
  std::vector<std::string> out;
  for (const Row& r : connection(session).query("SELECT DISTINCT name FROM datasets WHERE committed = 1 ORDER BY name")) out.push_back(r.text(0));
  return out;
}

std::vector<DatasetInfo> Datasets::versions(const std::string& name) const {
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), std::string(kInfoColumns) + " WHERE d.name = ? AND d.committed = 1 ORDER BY d.version", {name});
}

DatasetInfo Datasets::get(const std::string& name, int64_t version) const {
  Session session = open_session(*impl_, Access::Read);
  return info_of(connection(session), committed_row(connection(session), name, version));
}

DatasetInfo Datasets::get(const std::string& name) const {
  Session session = open_session(*impl_, Access::Read);
  std::vector<DatasetInfo> found = infos(connection(session), std::string(kInfoColumns) +
                                         " WHERE d.name = ? AND d.committed = 1 ORDER BY d.created_ms DESC, d.id DESC LIMIT 1", {name});
  if (found.empty()) throw NotFoundError("store: no latest version: there is no committed dataset '" + name + "'");
  return found[0];
}

namespace {

// The column of a dataset version's number `metric`, the "metrics" its catalog filters and ranks by.
const char* number_column(const char* op, const std::string& metric) {
  static const char* const columns[] = {"samples", "shards", "version", "created_ms"};
  for (const char* c : columns)
    if (metric == c) return c;
  throw ValueError(std::string(op) + ": dataset versions have no metric " + loom::detail::quote_text(metric) +
                   " (valid: samples, shards, version, created_ms)");
}

std::string dataset_where(const DatasetQuery& q, std::vector<Value>& params) {
  std::string sql = " WHERE d.committed = 1";
  if (q.name) {
    sql += " AND d.name = ?";
    params.emplace_back(*q.name);
  }
  for (const std::string& tag : q.tags) {
    check_label("find", "tag", tag);
    sql += " AND EXISTS (SELECT 1 FROM dataset_tags t WHERE t.dataset_id = d.id AND t.tag = ?)";
    params.emplace_back(tag);
  }
  for (const MetricFilter& f : q.metrics) {
    const char* column = number_column("find", f.metric);
    const char* op = detail::sql_comparison("find", "metric operator", f.op, "'" + f.metric + "'");
    if (std::isnan(f.value)) throw ValueError("find: the value compared with metric '" + f.metric + "' is NaN");
    sql += std::string(" AND d.") + column + " " + op + " ?";
    params.emplace_back(f.value);
  }
  return sql;
}

}  // namespace

std::vector<DatasetInfo> Datasets::find(const DatasetQuery& query) const {
  std::vector<Value> params;
  const std::string sql = std::string(kInfoColumns) + dataset_where(query, params) + " ORDER BY d.name, d.version";
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), sql, params);
}

std::vector<DatasetInfo> Datasets::find_top(const std::string& metric, Order order, int64_t k, const DatasetQuery& query) const {
  const char* column = number_column("find_top", metric);
  if (k < 1) throw ValueError("find_top: k is " + std::to_string(k) + " (valid: k >= 1)");
  std::vector<Value> params;
  std::string sql = std::string(kInfoColumns) + dataset_where(query, params) + " ORDER BY d." + column +
                    (order == Order::Max ? " DESC" : " ASC") + ", d.created_ms, d.id LIMIT ?";
  params.emplace_back(k);
  Session session = open_session(*impl_, Access::Read);
  return infos(connection(session), sql, params);
}

std::shared_ptr<DatasetView> Datasets::query(const std::string& name, int64_t version, const SampleQuery& q) const {
  // The query is checked and its SQL built before the database is touched.
  if (q.offset < 0) throw ValueError("query: offset is " + std::to_string(q.offset) + " (valid: >= 0)");
  if (q.limit < -1) throw ValueError("query: limit is " + std::to_string(q.limit) + " (valid: -1 for none, or >= 0)");
  if (q.cache_shards < 1) throw ValueError("query: cache_shards is " + std::to_string(q.cache_shards) + " (valid: >= 1)");
  std::vector<Value> params;
  std::string sql = "SELECT s.idx, s.shard, s.position, s.metadata FROM dataset_samples s";
  if (!q.order_by.empty()) {
    check_label("query", "order_by key", q.order_by);
    sql += " LEFT JOIN dataset_sample_meta o ON o.dataset_id = s.dataset_id AND o.idx = s.idx AND o.mkey = ?";
    params.emplace_back(q.order_by);
  }
  sql += " WHERE s.dataset_id = ?";
  const size_t id_param = params.size();
  params.emplace_back(int64_t(0));
  for (const std::string& tag : q.tags) {
    check_label("query", "tag", tag);
    sql += " AND EXISTS (SELECT 1 FROM dataset_sample_tags t WHERE t.dataset_id = s.dataset_id AND t.idx = s.idx AND t.tag = ?)";
    params.emplace_back(tag);
  }
  for (const Predicate& p : q.where) {
    check_label("query", "metadata key", p.key);
    const char* op = detail::sql_comparison("query", "operator", p.op, "metadata key '" + p.key + "'");
    const std::string sub = " AND EXISTS (SELECT 1 FROM dataset_sample_meta p WHERE p.dataset_id = s.dataset_id AND p.idx = s.idx AND p.mkey = ? AND ";
    params.emplace_back(p.key);
    if (p.value.is_text()) {
      if (p.op != "==" && p.op != "!=")
        throw ValueError("query: operator '" + p.op + "' compares metadata key '" + p.key + "' with the string " +
                         loom::detail::quote_text(p.value.text()) + " (valid for strings: == and !=)");
      if (p.value.text().find('\0') != std::string::npos)
        throw ValueError("query: the string compared with metadata key '" + p.key +
                         "' holds U+0000 (valid: strings without NUL characters, as append stores them)");
      sql += sub + "p.str " + op + " ?)";
      params.emplace_back(p.value.text());
    } else {
      if (std::isnan(p.value.number())) throw ValueError("query: the value compared with metadata key '" + p.key + "' is NaN");
      sql += sub + "p.num " + op + " ?)";
      params.emplace_back(p.value.number());
    }
  }
  const char* dir = q.descending ? " DESC" : "";
  if (!q.order_by.empty())
    sql += std::string(" ORDER BY CASE WHEN o.num IS NOT NULL THEN 0 WHEN o.str IS NOT NULL THEN 1 ELSE 2 END, o.num") + dir +
           ", o.str" + dir + ", s.idx";
  else
    sql += std::string(" ORDER BY s.idx") + dir;
  if (q.limit >= 0) {
    sql += " LIMIT ? OFFSET ?";
    params.emplace_back(q.limit);
    params.emplace_back(q.offset);
  }

  auto shared = std::make_shared<DatasetView::Shared>();
  shared->impl = impl_;
  shared->capacity = static_cast<size_t>(q.cache_shards);
  std::vector<DatasetView::Entry> entries;
  std::vector<std::string> metadata;
  std::vector<std::vector<std::string>> tags;
  {
    Session session = open_session(*impl_, Access::Read);
    detail::Connection& conn = connection(session);
    const Row row = committed_row(conn, name, version);
    const int64_t id = row.integer(0);
    shared->info = info_of(conn, row);
    params[id_param] = id;
    if (q.fields.empty()) shared->fields = shared->info.fields;
    for (const std::string& f : q.fields) {
      auto it = std::find_if(shared->info.fields.begin(), shared->info.fields.end(), [&](const FieldInfo& fi) { return fi.name == f; });
      if (it == shared->info.fields.end()) {
        std::string names;
        for (const FieldInfo& fi : shared->info.fields) names += (names.empty() ? "" : ", ") + fi.name;
        throw ValueError("query: " + what(name, version) + " has no field '" + f + "' (its fields: " + names + ")");
      }
      shared->fields.push_back(*it);
    }
    for (const Row& r : conn.query("SELECT shard, blob, samples FROM dataset_shards WHERE dataset_id = ? ORDER BY shard", {id})) {
      if (r.integer(0) != static_cast<int64_t>(shared->shards.size()))
        throw StoreError("store: " + what(name, version) + " has a gap in its shard numbers at " + std::to_string(shared->shards.size()));
      shared->shards.push_back(impl_->blobs->ref(conn, r.text(1), what(name, version) + " shard " + std::to_string(r.integer(0))));
      shared->shard_samples.push_back(r.integer(2));
    }
    int64_t skip = q.limit >= 0 ? 0 : q.offset;  // with a limit, OFFSET did it
    std::unordered_map<int64_t, size_t> at;
    for (const Row& r : conn.query(sql, params)) {
      if (skip > 0) {
        --skip;
        continue;
      }
      const int64_t shard = r.integer(1), position = r.integer(2);
      if (shard < 0 || shard >= static_cast<int64_t>(shared->shards.size()) || position < 0 || position >= shared->shard_samples[shard])
        throw StoreError("store: " + what(name, version) + " sample " + std::to_string(r.integer(0)) +
                         " points outside its shards (shard " + std::to_string(shard) + ", position " + std::to_string(position) + ")");
      at.emplace(r.integer(0), entries.size());
      entries.push_back({r.integer(0), shard, position});
      metadata.push_back(r.text(3));
    }
    tags.resize(entries.size());
    for (const Row& r : conn.query("SELECT idx, tag FROM dataset_sample_tags WHERE dataset_id = ? ORDER BY idx, tag", {id})) {
      auto it = at.find(r.integer(0));
      if (it != at.end()) tags[it->second].push_back(r.text(1));
    }
  }
  return std::make_shared<DatasetView>(std::move(shared), std::move(entries), std::move(metadata), std::move(tags));
}

void Datasets::remove(const std::string& name, int64_t version) {
  std::vector<std::string> freed;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    std::vector<Row> rows = conn.query("SELECT id FROM datasets WHERE name = ? AND version = ?", {name, version});
    if (rows.empty()) throw NotFoundError("remove: no " + what(name, version) + ": " + versions_help(conn, name));
    freed = delete_version(*impl_, conn, rows[0].integer(0));
    session.commit();
  }
  detail::remove_unreferenced(*impl_, freed);
}

int64_t Datasets::remove_drafts(int64_t older_than_ms) {
  if (older_than_ms < 0) throw ValueError("remove_drafts: older_than_ms is negative");
  std::vector<std::string> freed;
  int64_t removed = 0;
  {
    Session session = open_session(*impl_, Access::Write);
    detail::Connection& conn = connection(session);
    const std::vector<Row> rows = conn.query("SELECT id FROM datasets WHERE committed = 0 AND created_ms <= ?", {now_ms() - older_than_ms});
    for (const Row& r : rows) {
      const std::vector<std::string> version_freed = delete_version(*impl_, conn, r.integer(0));
      freed.insert(freed.end(), version_freed.begin(), version_freed.end());
    }
    removed = static_cast<int64_t>(rows.size());
    session.commit();
  }
  detail::remove_unreferenced(*impl_, freed);
  return removed;
}

}  // namespace loom::store

// Appending samples to a new dataset version and committing it (loom/store/datasets.h,
// DatasetWriter), and Datasets::create, which starts one.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/json_util.h"
#include "core/utf8.h"
#include "loom/ops/creation.h"
#include "store/datasets_impl.h"
#include "store/query.h"

namespace loom::store {

using detail::connection;
using detail::dataset_what;
using detail::kMaxShardSamples;
using detail::kShardBytes;
using detail::now_ms;
using detail::open_session;
using detail::Row;
using detail::shape_text;
using detail::Value;
using nlohmann::json;

namespace {

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

  std::string source() const { return dataset_what(name, version); }

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
                 {detail::fields_json(fields), flushed + n, shards + 1, id});
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
  std::vector<std::string> tags = detail::tag_set(op, sample.tags);
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
  info.schema = st.fields;
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
    freed = detail::delete_version(*st.impl, connection(session), st.id);
    session.commit();
  }
  detail::remove_unreferenced(*st.impl, freed);
}

// ---------------------------------------------------------------- Datasets::create

DatasetWriter Datasets::create(const std::string& name, const DatasetOptions& options) {
  check_label("create", "dataset name", name);
  std::vector<std::string> tags = detail::tag_set("create", options.tags);
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
  st->version = detail::next_version(conn, detail::dataset_catalog().tables(), name);
  st->id = conn.query("INSERT INTO datasets (name, version, created_ms, committed, fields, samples, shards, task_id, run_id) "
                      "VALUES (?, ?, ?, 0, '[]', 0, 0, ?, ?) RETURNING id",
                      {name, st->version, now_ms(), options.produced_by.task_id ? Value(options.produced_by.task_id) : Value(),
                       options.produced_by.run_id ? Value(options.produced_by.run_id) : Value()})[0]
               .integer(0);
  detail::insert_tags(conn, detail::dataset_catalog().tables(), st->id, tags);
  session.commit();
  return DatasetWriter(std::move(st));
}

}  // namespace loom::store

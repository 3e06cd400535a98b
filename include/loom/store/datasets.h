#pragma once
// The dataset store of a Store (docs/store.md, "Datasets"): named, versioned collections of
// samples. A sample is named tensors (the fields, e.g. "x" and "y"; the same names, dtypes and
// shapes in every sample of a version), a metadata JSON object and tags. Samples are stored
// stacked in shards (safetensors blobs, content-addressed and deduplicated) with one index row
// per sample (shard, position, metadata, tags), so that queries never read a shard.
//
//   store::DatasetWriter w = s.datasets().create("points", {.fields = {"x", "y"}});
//   w.append({.tensors = {{"x", x}, {"y", y}}, .metadata = R"({"label": 3})"});
//   store::DatasetInfo v = w.commit();                       // immutable from here
//   auto view = s.datasets().query("points", v.version, {.where = {{"label", "==", 3}}});
//   data::DataLoader loader(view, {.batch_size = 64, .n_jobs = 2});   // reads shards lazily
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"
#include "loom/data/dataset.h"
#include "loom/store/catalog.h"
#include "loom/store/provenance.h"
#include "loom/store/record.h"
#include "loom/store/store.h"

namespace loom::store {

struct LOOM_API Sample {
  std::map<std::string, Tensor> tensors;  // field name -> tensor (any layout; copied)
  std::string metadata = "{}";            // a JSON object
  std::vector<std::string> tags;
};

struct LOOM_API FieldInfo {
  std::string name;
  DType dtype = Float32;
  Shape shape;  // of one sample

  // Its JSON's keys (loom/store/record.h), {"name": "x", "dtype": "float32", "shape": [28, 28]}:
  // a record of JSON only, as a version's row holds its field list in one column.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("name", name);
    visit("dtype", dtype);
    visit("shape", shape);
  }
};

struct LOOM_API DatasetInfo {
  std::string name;
  int64_t version = 0;
  int64_t created_ms = 0;          // Unix time in milliseconds
  int64_t samples = 0;
  int64_t shards = 0;
  std::vector<FieldInfo> schema;   // its fields, in the dataset's field order (the order of an Example)
  std::vector<std::string> tags;   // sorted
  Provenance produced_by;          // the task and run that wrote it (0: none)

  // Its columns and its JSON's keys, listed once (loom/store/record.h): the store's reader,
  // `loom datasets --json` and the dashboard's /api/datasets/NAME come from this list.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("name", name);
    visit("version", version);
    visit("created_ms", created_ms);
    visit("samples", samples);
    visit("shards", shards);
    // column `fields` holds the list as JSON in safetensors' dtype names ("F32"), which the
    // catalog decodes and checks itself (src/store/datasets.cpp)
    visit("fields", schema, RecordField::not_stored());
    visit("tags", tags, RecordField::not_stored());  // dataset_tags
    visit("produced_by", produced_by);
  }
};

struct LOOM_API DatasetOptions {
  // The field order of an Example (e.g. {"x", "y"}: the loader's inputs, then the target).
  // Empty: the first sample's field names, sorted.
  std::vector<std::string> fields;
  std::vector<std::string> tags;    // the version's tags
  int64_t shard_samples = 0;        // samples per shard; 0: as many as fit in about 4 MiB
  Provenance produced_by;           // recorded with the version (run_id checked: NotFoundError)
};

// A metadata value compared with: a number or a string (implicit from either).
class LOOM_API MetaValue {
 public:
  MetaValue(double v) : number_(v) {}
  MetaValue(int v) : number_(v) {}
  MetaValue(int64_t v) : number_(static_cast<double>(v)) {}
  MetaValue(const char* s) : text_(s), is_text_(true) {}
  MetaValue(std::string s) : text_(std::move(s)), is_text_(true) {}
  bool is_text() const { return is_text_; }
  double number() const { return number_; }
  const std::string& text() const { return text_; }

 private:
  double number_ = 0;
  std::string text_;
  bool is_text_ = false;
};

// `key op value` on a top-level key of a sample's metadata. Numbers (and booleans, as 1 and 0)
// compare with < <= == != >= >; strings with == and !=. A sample without the key, or whose
// value is of the other kind (or an array, object or null), does not match.
struct LOOM_API Predicate {
  std::string key;
  std::string op;
  MetaValue value = 0;
};

struct LOOM_API SampleQuery {
  std::vector<std::string> tags;        // a sample must carry all of them
  std::vector<Predicate> where;         // and satisfy all of them
  // A metadata key to order by (numbers ascending, then strings, then samples without it);
  // empty: by sample index. Ties go by sample index.
  std::string order_by;
  bool descending = false;
  int64_t offset = 0;
  int64_t limit = -1;                   // -1: no limit
  std::vector<std::string> fields;      // the Example's fields, in order; empty: all
  int64_t cache_shards = 16;            // decoded shards a view keeps (least recently used go)
};

// A SampleQuery as a record's field (loom/store/record.h): kept as its JSON text in one column,
// sample_query_json's (loom/store/queries.h; cache_shards is the opener's, not kept), its JSON
// the object that text is. ValueError for malformed text.
LOOM_API std::string record_text(const SampleQuery& q);
LOOM_API SampleQuery record_from_text(const std::string& text, const SampleQuery*);

// The catalog's query (loom/store/catalog.h): name, tags, and filters on a version's numbers
// ("samples", "shards", "version", "created_ms").
using DatasetQuery = CatalogQuery;

// A lazy, read-only view of the samples a query selected, in the query's order: a
// data::Dataset for the DataLoader (get and get_batch may be called from its workers). A
// shard is read (one blob read, zstd decode, SHA-256 check, safetensors parse) the first time
// one of its samples is needed and kept in a small LRU cache; samples are then copied out.
// The view keeps working after its Store handle is gone; a version removed meanwhile makes
// reads of its shards fail with BlobError.
class LOOM_API DatasetView : public data::Dataset {
 public:
  struct Entry {
    int64_t index;     // the sample's index in the version
    int64_t shard;
    int64_t position;  // in the shard
  };
  struct Shared;      // the shards' blobs and the cache (src/store/datasets.cpp)
  DatasetView(std::shared_ptr<Shared> shared, std::vector<Entry> entries, std::vector<std::string> metadata,
              std::vector<std::vector<std::string>> tags);
  ~DatasetView() override;

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  data::Example get(int64_t i) const override;
  data::Batch get_batch(const std::vector<int64_t>& indices) const override;

  const DatasetInfo& info() const;
  const std::vector<FieldInfo>& fields() const;     // the fields an Example holds, in order
  int64_t index(int64_t i) const;                   // the sample's index in the version
  const std::string& metadata(int64_t i) const;     // its metadata (JSON object text)
  const std::vector<std::string>& tags(int64_t i) const;
  Sample sample(int64_t i) const;                   // every field, metadata and tags
  // Shards read from blobs so far (cache misses): a query of one sample reads one shard.
  int64_t shard_reads() const;

 private:
  void check(int64_t i) const;
  std::shared_ptr<Shared> shared_;
  std::vector<Entry> entries_;
  std::vector<std::string> metadata_;
  std::vector<std::vector<std::string>> tags_;
};

// Appends samples to a new, uncommitted version and commits it. Each full shard is written in
// its own transaction (memory stays bounded by one shard); the version is invisible to
// versions(), find() and query() until commit(). A writer destroyed uncommitted (an exception
// during an import) removes its draft and releases its blobs; one killed with its process
// leaves a draft that Datasets::remove_drafts() deletes.
class LOOM_API DatasetWriter {
 public:
  DatasetWriter(DatasetWriter&&) noexcept;
  DatasetWriter& operator=(DatasetWriter&&) = delete;
  ~DatasetWriter();

  // Checks the sample against the version's fields (the first sample fixes dtypes and shapes):
  // ValueError for a missing or unknown field, ShapeError / DTypeError for a mismatch,
  // ValueError for metadata that is not a JSON object or holds a non-finite number, or a bad
  // tag. A rejected sample changes nothing; the writer stays usable.
  void append(const Sample& sample);
  int64_t size() const;
  int64_t version() const;
  // Writes the last shard and makes the version visible. ValueError for a version without
  // samples (abort() it instead).
  DatasetInfo commit();
  void abort();  // removes the draft

  struct State;

 private:
  friend class Datasets;
  explicit DatasetWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

struct LOOM_API ImportOptions {
  std::vector<std::string> tags;                 // the version's tags
  int64_t shard_samples = 0;
  // Scalar fields (one value per sample) also written into each sample's metadata: field -> key.
  // import_idx adds {"y": "label"} itself.
  std::map<std::string, std::string> metadata;
  Provenance produced_by;  // recorded with the version
};

// The notification channel (store::Notifications) on which every commit of a dataset version wakes
// its waiters, in every process on the store (stream controllers, loom/flow/controllers.h).
inline constexpr const char* kDatasetVersionChannel = "loom_dataset_versions";

class LOOM_API Datasets {
 public:
  explicit Datasets(std::shared_ptr<detail::StoreImpl> impl);

  // A new version of `name` (1, 2, ... per name, never reused). ValueError for an invalid name,
  // tag, field name or shard size.
  DatasetWriter create(const std::string& name, const DatasetOptions& options = {});

  // Imports as one version (all or nothing): IDX images and labels (fields "x" and "y",
  // metadata {"label": y}; labels_path may be empty); NPY arrays, one per field, sharing their
  // first dimension; CSV columns (by header name) grouped into fields (one column: a scalar per
  // sample; several: a vector), read as csv.dtype. Reader errors are IOError naming the file.
  DatasetInfo import_idx(const std::string& name, const std::string& images_path, const std::string& labels_path,
                         const ImportOptions& options = {});
  DatasetInfo import_npy(const std::string& name, const std::map<std::string, std::string>& field_paths,
                         const ImportOptions& options = {});
  DatasetInfo import_csv(const std::string& name, const std::string& path,
                         const std::map<std::string, std::vector<std::string>>& field_columns,
                         const ImportOptions& options = {}, DType dtype = Float32, char delimiter = ',');

  std::vector<std::string> names() const;                           // sorted, committed only
  std::vector<DatasetInfo> versions(const std::string& name) const;  // committed, ascending
  DatasetInfo get(const std::string& name, int64_t version) const;   // NotFoundError
  DatasetInfo get(const std::string& name) const;                    // the latest
  // Committed versions matching the query, by name then version.
  std::vector<DatasetInfo> find(const DatasetQuery& query = {}) const;
  // The k committed versions (matching `query`) with the highest (Max) or lowest (Min) value of
  // one of their numbers, `metric`: "samples", "shards", "version" or "created_ms" (ValueError
  // otherwise); ties go to the older version. The same signature as Models::find_top.
  std::vector<DatasetInfo> find_top(const std::string& metric, Order order, int64_t k = 1, const DatasetQuery& query = {}) const;

  // The samples of a committed version that match `query`, as a lazy view. ValueError for a bad
  // predicate (operator, key, NaN value, a string with an ordering operator), an unknown field
  // or a negative offset; NotFoundError for a missing version.
  std::shared_ptr<DatasetView> query(const std::string& name, int64_t version, const SampleQuery& query = {}) const;

  // Deletes a version (rows, sample index) and releases its shards: a shard blob that another
  // version (or model) still uses stays. remove_drafts deletes uncommitted versions older than
  // `older_than_ms` milliseconds (0: all, which must not race a live writer).
  void remove(const std::string& name, int64_t version);
  int64_t remove_drafts(int64_t older_than_ms = 0);

 private:
  std::shared_ptr<detail::StoreImpl> impl_;
};

}  // namespace loom::store

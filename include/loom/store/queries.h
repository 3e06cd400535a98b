#pragma once
// Named queries (docs/store.md, "Named queries"): a SampleQuery over one version, a range of
// versions or every version of a dataset, stored under a name, shared by everyone on the store
// and opened as a lazy data::Dataset. A query whose range ends at "latest" (last_version 0)
// follows new versions: each open() sees the versions committed by then.
//
//   store::Queries q = s.queries();
//   q.create({.name = "shirts", .dataset = "fashion", .first_version = 1,   // every version
//             .query = {.where = {{"label", "==", 6}}}});
//   std::shared_ptr<store::QueryView> view = q.open("shirts");               // a data::Dataset
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/data/dataset.h"
#include "loom/store/datasets.h"
#include "loom/store/record.h"

namespace loom::store {

struct LOOM_API NamedQuery {
  std::string name;           // 1 to 256 bytes of UTF-8 without control characters
  std::string dataset;        // a dataset with a committed version
  // The versions it covers: first_version..last_version. last_version 0: up to the latest (new
  // versions join); first_version 0 (with last_version 0): the latest version only. One
  // version: first == last; every version: first 1, last 0.
  int64_t first_version = 1;
  int64_t last_version = 0;
  // Its selection in each version (cache_shards is the opener's, not stored). Over several
  // versions the samples come in version order, each version's in the query's order; offset and
  // limit apply to the whole.
  SampleQuery query;
  int64_t created_ms = 0;     // set by create

  // Its columns of dataset_queries and its JSON's keys, listed once (loom/store/record.h): the
  // store's reader and `loom queries ... --json` come from this list. `query` is one column of
  // JSON text (record_text, loom/store/datasets.h), an object in the JSON.
  template <class Visit>
  void fields(Visit&& visit) {
    visit("name", name);
    visit("dataset", dataset);
    visit("first_version", first_version);
    visit("last_version", last_version);
    visit("query", query);
    visit("created_ms", created_ms);
  }
};

// The samples of several versions of one dataset (one DatasetView per version), as one lazy
// data::Dataset. Every version must have the same fields (names, dtypes, shapes).
class LOOM_API QueryView : public data::Dataset {
 public:
  // ValueError when the parts' fields differ; `offset`/`limit` (-1: none) cut the concatenation.
  QueryView(std::vector<std::shared_ptr<DatasetView>> parts, int64_t offset = 0, int64_t limit = -1);
  int64_t size() const override { return static_cast<int64_t>(at_.size()); }
  data::Example get(int64_t i) const override;
  data::Batch get_batch(const std::vector<int64_t>& indices) const override;

  const std::vector<int64_t>& versions() const { return versions_; }  // the versions it read, ascending
  int64_t version(int64_t i) const;                                  // the version of sample i
  int64_t index(int64_t i) const;                                    // its index in that version
  const std::string& metadata(int64_t i) const;
  const std::vector<std::shared_ptr<DatasetView>>& parts() const { return parts_; }

 private:
  struct At {
    int32_t part;
    int64_t i;
  };
  const At& at(int64_t i) const;
  std::vector<std::shared_ptr<DatasetView>> parts_;
  std::vector<int64_t> versions_;
  std::vector<At> at_;
};

class LOOM_API Queries {
 public:
  explicit Queries(std::shared_ptr<detail::StoreImpl> impl);

  // Stores `q` (checked against the dataset: NotFoundError for an unknown dataset or a missing
  // pinned version; ValueError for a bad name, range, predicate, order key or field;
  // ConflictError for a name already taken). Returns it as stored.
  NamedQuery create(const NamedQuery& q);
  NamedQuery get(const std::string& name) const;     // NotFoundError
  std::vector<NamedQuery> list() const;              // by name
  void remove(const std::string& name);              // NotFoundError

  // The committed versions the query covers now, ascending (empty when none is committed).
  std::vector<int64_t> versions(const std::string& name) const;
  // Its samples now, as a lazy view (shards are read when samples are).
  std::shared_ptr<QueryView> open(const std::string& name, int64_t cache_shards = 16) const;
  // The samples `query` selects in the given committed versions of `dataset` (NotFoundError for
  // a missing one): what a stream controller's task reads (loom/flow/controllers.h).
  std::shared_ptr<QueryView> open_versions(const std::string& dataset, const std::vector<int64_t>& versions,
                                           const SampleQuery& query = {}) const;

 private:
  std::shared_ptr<detail::StoreImpl> impl_;
};

// A SampleQuery as JSON text and back (what a named query stores); ValueError for malformed text.
LOOM_API std::string sample_query_json(const SampleQuery& q);
LOOM_API SampleQuery parse_sample_query(const std::string& text);

}  // namespace loom::store

#pragma once
// What the dataset store's files share (datasets.cpp: the catalog, queries and removal;
// dataset_view.cpp: the lazy view and its shard cache; dataset_writer.cpp: appending and
// committing a version; dataset_import.cpp: IDX, NPY and CSV imports). Private to the store.
#include <atomic>
#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/io/safetensors.h"
#include "loom/store/datasets.h"
#include "store/catalog_impl.h"
#include "store/store_impl.h"

namespace loom::store::detail {

inline constexpr int64_t kShardBytes = 4 << 20;  // the default shard's size: one read serves thousands of MNIST samples
inline constexpr int64_t kMaxShardSamples = 1 << 20;

// The dataset catalog: its tables and its reads of DatasetInfo (datasets.cpp).
const Catalog<DatasetInfo>& dataset_catalog();

// "dataset 'd' version 2"
std::string dataset_what(const std::string& name, int64_t version);
// "[3, 2]"
std::string shape_text(const Shape& s);

// A version's field list as its row's `fields` column holds it (JSON, safetensors' dtype
// names), and back: a malformed list is a StoreError naming `source`.
std::string fields_json(const std::vector<FieldInfo>& fields);
std::vector<FieldInfo> parse_fields(const std::string& text, const std::string& source);

// In the caller's write session: deletes a version (committed or draft) and releases its
// shards. Returns the blobs no row references any more, whose bytes go after the commit
// (detail::remove_unreferenced; src/store/blobs.h says why).
std::vector<std::string> delete_version(StoreImpl& impl, Connection& conn, int64_t id);

}  // namespace loom::store::detail

namespace loom::store {

// A view's shards: where they are, which fields it copies out, and the decoded ones it keeps.
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

  // Reads, verifies and decodes shard s (BlobError when it does not hold the version's fields).
  ShardPtr load(int64_t s) const;
  // The decoded shard, read once however many workers ask for it at the same time.
  ShardPtr shard(int64_t s);
};

}  // namespace loom::store

// Named queries (docs/store.md, "Named queries"): stored, listed, shown and deleted on both
// backends; opened as lazy datasets whose samples are those an in-memory filter of the pushed
// samples selects, over one version, a range, every version (following new ones) or the latest;
// typed errors with nothing written; an old store (schema 7) upgraded on open.
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/store/datasets.h>
#include <loom/store/error.h>
#include <loom/store/queries.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include "unit/common/core_test_util.h"
#include "unit/store/store_test_util.h"

using namespace loom;
using loom_test::error_message;
using loom_test::raw_sql;

namespace {

// A version of `n` samples numbered from `first`: x = [i, -i], y = i, metadata {"i": i, "label": i % 3}.
store::DatasetInfo push(store::Store& s, int64_t first, int64_t n, const std::string& name = "points") {
  store::DatasetWriter w = s.datasets().create(name, {.fields = {"x", "y"}, .shard_samples = 4});
  for (int64_t i = first; i < first + n; ++i) {
    store::Sample sample;
    sample.tensors = {{"x", from_vector<float>({float(i), float(-i)}, {2})}, {"y", full({}, i, Int64, Device::cpu())}};
    sample.metadata = nlohmann::json{{"i", i}, {"label", i % 3}}.dump();
    if (i % 2 == 0) sample.tags.push_back("even");
    w.append(sample);
  }
  return w.commit();
}

// The sample numbers a view holds, read through its tensors (x[0] and y agree).
std::vector<int64_t> numbers(const data::Dataset& view) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < view.size(); ++k) {
    const data::Example e = view.get(k);
    EXPECT_EQ(static_cast<int64_t>(static_cast<const float*>(e[0].data_ptr())[0]), e[1].item<int64_t>());
    out.push_back(e[1].item<int64_t>());
  }
  return out;
}

// The reference: numbers in [lo, hi) with label == 1 and even, as the query below selects.
std::vector<int64_t> expected(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t i = lo; i < hi; ++i)
    if (i % 3 == 1 && i % 2 == 0) out.push_back(i);
  return out;
}

const store::SampleQuery kOnesEven{.tags = {"even"}, .where = {{"label", "==", 1}}};

class StoreQueries : public loom_test::StoreBackendTest {};

}  // namespace

INSTANTIATE_STORE_BACKENDS(StoreQueries);

TEST_P(StoreQueries, StoredListedOpenedAndFollowingNewVersions) {
  store::Store s = store::Store::open(url());
  push(s, 0, 10);   // version 1: 0..9
  push(s, 10, 10);  // version 2: 10..19
  store::Queries q = s.queries();
  q.create({.name = "all", .dataset = "points", .first_version = 1, .last_version = 0, .query = kOnesEven});
  q.create({.name = "v2", .dataset = "points", .first_version = 2, .last_version = 2, .query = kOnesEven});
  q.create({.name = "latest", .dataset = "points", .first_version = 0, .last_version = 0});
  q.create({.name = "top", .dataset = "points", .query = {.order_by = "i", .descending = true, .offset = 1, .limit = 3}});

  const std::vector<store::NamedQuery> listed = q.list();
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(listed[0].name, "all");
  EXPECT_EQ(listed[1].name, "latest");
  const store::NamedQuery shown = q.get("all");
  EXPECT_EQ(shown.dataset, "points");
  EXPECT_EQ(shown.query.tags, std::vector<std::string>{"even"});
  ASSERT_EQ(shown.query.where.size(), 1u);
  EXPECT_EQ(shown.query.where[0].op, "==");
  EXPECT_EQ(shown.query.where[0].value.number(), 1);

  EXPECT_EQ(numbers(*q.open("all")), expected(0, 20));
  EXPECT_EQ(numbers(*q.open("v2")), expected(10, 20));
  EXPECT_EQ(numbers(*q.open("latest")), (std::vector<int64_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  // Over several versions: each version in its order, offset and limit over the whole.
  EXPECT_EQ(numbers(*q.open("top")), (std::vector<int64_t>{8, 7, 6}));

  push(s, 20, 10);  // version 3: "all" and "latest" follow it, the pinned one does not
  EXPECT_EQ(q.versions("all"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(numbers(*q.open("all")), expected(0, 30));
  EXPECT_EQ(numbers(*q.open("v2")), expected(10, 20));
  EXPECT_EQ(q.open("latest")->versions(), std::vector<int64_t>{3});

  // The view is a lazy data::Dataset: batches across versions, versions and metadata per sample.
  const std::shared_ptr<store::QueryView> all = q.open("all");
  const std::vector<int64_t> want = expected(0, 30);
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < all->size(); ++k) idx.push_back(k);
  const data::Batch batch = all->get_batch(idx);
  for (int64_t k = 0; k < all->size(); ++k) {
    EXPECT_EQ(batch[1][k].item<int64_t>(), want[k]);
    EXPECT_EQ(all->version(k), want[k] / 10 + 1);
    EXPECT_EQ(nlohmann::json::parse(all->metadata(k))["i"], want[k]);
  }
  EXPECT_THROW(all->get(all->size()), IndexError);

  q.remove("v2");
  EXPECT_EQ(q.list().size(), 3u);
  EXPECT_THROW(q.get("v2"), store::NotFoundError);
  // Seen by another handle on the same store.
  EXPECT_EQ(store::Store::open(url()).queries().get("all").first_version, 1);
}

TEST_P(StoreQueries, BadQueriesAreTypedErrorsAndWriteNothing) {
  store::Store s = store::Store::open(url());
  push(s, 0, 6);
  store::Queries q = s.queries();
  const std::string unknown = error_message<store::NotFoundError>([&] { q.create({.name = "a", .dataset = "nope"}); });
  EXPECT_NE(unknown.find("nope"), std::string::npos) << unknown;
  EXPECT_THROW(q.create({.name = "a", .dataset = "points", .first_version = 1, .last_version = 9}), store::NotFoundError);
  const std::string op = error_message<ValueError>([&] {
    q.create({.name = "a", .dataset = "points", .query = {.where = {{"label", "=~", 1}}}});
  });
  EXPECT_NE(op.find("=~"), std::string::npos) << op;
  EXPECT_THROW(q.create({.name = "a", .dataset = "points", .query = {.where = {{"label", "<", "x"}}}}), ValueError);
  EXPECT_THROW(q.create({.name = "a", .dataset = "points", .query = {.fields = {"z"}}}), ValueError);
  EXPECT_THROW(q.create({.name = "a", .dataset = "points", .first_version = 2, .last_version = 1}), ValueError);
  EXPECT_THROW(q.create({.name = "a", .dataset = "points", .first_version = 0, .last_version = 1}), ValueError);
  EXPECT_THROW(q.create({.name = "", .dataset = "points"}), ValueError);
  EXPECT_TRUE(q.list().empty());
  q.create({.name = "a", .dataset = "points"});
  const std::string dup = error_message<store::ConflictError>([&] { q.create({.name = "a", .dataset = "points", .first_version = 1}); });
  EXPECT_NE(dup.find("already exists"), std::string::npos) << dup;
  EXPECT_EQ(q.list().size(), 1u);
  EXPECT_THROW(q.remove("b"), store::NotFoundError);
  EXPECT_THROW(q.open("b"), store::NotFoundError);
  EXPECT_THROW(store::parse_sample_query("{\"wher\": []}"), ValueError);
  EXPECT_THROW(store::parse_sample_query("[1]"), ValueError);
}

TEST_P(StoreQueries, SampleQueryJsonRoundTrips) {
  const store::SampleQuery in{.tags = {"a", "b"}, .where = {{"k", ">=", 2.5}, {"s", "!=", "x"}}, .order_by = "k",
                              .descending = true, .offset = 3, .limit = 7, .fields = {"x"}};
  const store::SampleQuery out = store::parse_sample_query(store::sample_query_json(in));
  EXPECT_EQ(out.tags, in.tags);
  ASSERT_EQ(out.where.size(), 2u);
  EXPECT_EQ(out.where[0].value.number(), 2.5);
  EXPECT_TRUE(out.where[1].value.is_text());
  EXPECT_EQ(out.where[1].value.text(), "x");
  EXPECT_EQ(out.order_by, "k");
  EXPECT_TRUE(out.descending);
  EXPECT_EQ(out.offset, 3);
  EXPECT_EQ(out.limit, 7);
  EXPECT_EQ(out.fields, in.fields);
}

TEST_P(StoreQueries, AnOldStoreIsUpgradedOnOpen) {
  {
    store::Store s = store::Store::open(url());
    push(s, 0, 6);
  }
  // The store as schema 7 left it: no named queries.
  raw_sql(url(), "DROP TABLE dataset_queries");
  raw_sql(url(), "DROP TABLE run_metric_summaries");  // and migration 9's
  raw_sql(url(), "UPDATE loom_schema SET version = 7");
  store::Store s = store::Store::open(url());
  EXPECT_EQ(s.schema_version(), store::Store::library_schema_version());
  s.queries().create({.name = "ones", .dataset = "points", .query = {.where = {{"label", "==", 1}}}});
  EXPECT_EQ(numbers(*s.queries().open("ones")), (std::vector<int64_t>{1, 4}));
}

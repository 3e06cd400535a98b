// Checkpoints written during data-parallel fit (by rank 0) resume at another number of ranks,
// in one process, and from one process at N ranks, at an epoch boundary and mid-epoch; the
// result is that of an uninterrupted run at the new count within the documented tolerance
// (docs/distributed.md, "Checkpoints across rank counts").
//
// Across two runs: ctest's dist_np2 writes its checkpoints into $LOOM_DIST_CHECKPOINTS, and
// dist_np1 and dist_np3 (LOOM_DIST_RESUME_FROM=2, a fixture that requires dist_np2) resume them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/dist_test_util.h"
#include "loom/dist/optimizer.h"
#include "loom/loom.h"

namespace loom {
namespace {

constexpr int64_t kGlobalBatch = 12;  // 48 examples: 4 steps per epoch at every rank count

struct Kind {
  const char* name;
  std::shared_ptr<data::TensorDataset> data;
};

// Rank 0 saves the checkpoint after step 2 of epoch 1 (the second), mid-epoch.
struct SaveMidEpoch : train::Callback {
  std::string path;
  const data::DataLoader* loader = nullptr;
  int64_t epoch = 0;
  bool root_only() const override { return true; }
  void on_epoch_begin(train::Model&, int64_t e) override { epoch = e; }
  void on_batch_end(train::Model& m, int64_t step, const train::Logs&) override {
    if (epoch == 1 && step == 2) m.save_checkpoint(path, loader);
  }
};

// The same start (seed 7, rank 0's weights) for every run. Batch norm is synchronized only when
// the run is data-parallel (in one process a synchronized layer would sum over the job's ranks).
Graph build(const Kind& k, bool distributed) {
  manual_seed(7);
  if (std::string(k.name) == "mlp") return dist_test::mlp_graph();
  Graph g = dist_test::cnn_graph(distributed);
  if (distributed) nn::sync_batch_norm(g);
  return g;
}

// A loader of the global batch: unsharded in one process, this rank's shard data-parallel.
data::DataLoader loader_for(const Kind& k, bool distributed, int64_t per_rank = 0) {
  const int64_t ranks = distributed ? dist::size() : 1;
  data::LoaderOptions o{.batch_size = per_rank ? per_rank : kGlobalBatch / ranks, .shuffle = true, .seed = 3};
  if (distributed) o.shard = dist::shard();
  return data::DataLoader(k.data, o);
}

train::FitOptions fit_options(int epochs, bool distributed, std::vector<std::shared_ptr<train::Callback>> cbs = {}) {
  train::FitOptions o{.epochs = epochs, .callbacks = std::move(cbs), .progress = false};
  if (distributed) o.distributed = dist::data_parallel();
  return o;
}

// 4 epochs uninterrupted: in one process, or data-parallel at size().
Graph uninterrupted(const Kind& k, bool distributed) {
  Graph g = build(k, distributed);
  train::Model m = dist_test::sgd_model(g);
  data::DataLoader l = loader_for(k, distributed);
  m.fit(l, fit_options(4, distributed));
  return g;
}

// 2 epochs (in one process or data-parallel), rank 0 writing `<stem>_epoch.ckpt` at the end of
// each epoch and `<stem>_mid.ckpt` mid-epoch 1.
void write_checkpoints(const Kind& k, bool distributed, const std::string& stem) {
  Graph g = build(k, distributed);
  train::Model m = dist_test::sgd_model(g);
  data::DataLoader l = loader_for(k, distributed);
  auto mid = std::make_shared<SaveMidEpoch>();
  mid->path = stem + "_mid.ckpt";
  mid->loader = &l;
  auto last = std::make_shared<train::ModelCheckpoint>("", stem + "_epoch.ckpt", "loss", train::MonitorMode::Auto, &l);
  if (distributed) {
    m.fit(l, fit_options(2, true, {mid, last}));
  } else if (dist::rank() == 0) {  // one process: rank 0 alone
    m.fit(l, fit_options(2, false, {mid, last}));
  }
  dist::barrier();  // the files are complete before any rank reads them
}

// Every rank loads the checkpoint and trains to the end of epoch 4, in one process or
// data-parallel at size().
Graph resume(const Kind& k, const std::string& path, bool distributed) {
  Graph g = build(k, distributed);
  train::Model m = dist_test::sgd_model(g);
  data::DataLoader l = loader_for(k, distributed);  // sharded first: a mid-epoch position counts in shards
  m.load_checkpoint(path, &l);
  train::FitOptions o = fit_options(0, distributed);
  o.total_epochs = 4;  // to 4 in all, whatever the checkpoint had done
  m.fit(l, o);
  EXPECT_EQ(m.epochs_done(), 4) << path;
  EXPECT_EQ(m.history().series.at("loss").size(), 4u) << path;
  return g;
}

std::string checkpoint_dir() {
  const char* env = std::getenv("LOOM_DIST_CHECKPOINTS");
  std::filesystem::path dir = env && *env ? env : (std::filesystem::temp_directory_path() / "loom_dist_resume_test");
  if (dist::rank() == 0) std::filesystem::create_directories(dir);
  dist::barrier();
  return dir.string();
}

void check(const Graph& want, const Graph& got, const std::string& what, double tolerance = 1) {
  SCOPED_TRACE(what);
  const double worst = dist_test::compare_state(want, got, 1e-5 * tolerance, 1e-4 * tolerance);
  if (dist::rank() == 0) std::printf("  %s: worst relative difference %.3g\n", what.c_str(), worst);
}

TEST(DistResume, CheckpointsResumeAtAnotherRankCount) {
  const int size = dist::size();
  ASSERT_EQ(kGlobalBatch % size, 0) << "run with 1, 2, 3, 4, 6 or 12 processes";
  const std::string dir = checkpoint_dir();
  const char* from_env = std::getenv("LOOM_DIST_RESUME_FROM");
  const int from = from_env && *from_env ? std::atoi(from_env) : 0;
  for (const Kind& k : {Kind{"mlp", dist_test::mlp_data()}, Kind{"cnn", dist_test::cnn_data()}}) {
    const Graph one = uninterrupted(k, false);
    const Graph here = size > 1 ? uninterrupted(k, true) : one;
    const std::string np = dir + "/" + k.name + "_np" + std::to_string(size);
    const std::string solo = dir + "/" + k.name + "_solo_np" + std::to_string(size);  // one process, this run
    write_checkpoints(k, size > 1, np);
    write_checkpoints(k, false, solo);
    for (const char* at : {"_epoch.ckpt", "_mid.ckpt"}) {
      const std::string tag = std::string(k.name) + at;
      // N -> 1: every rank alone
      check(one, resume(k, np + at, false), tag + ", " + std::to_string(size) + " ranks -> 1 process");
      // 1 -> N and N -> N
      if (size > 1) {
        check(here, resume(k, solo + at, true), tag + ", 1 process -> " + std::to_string(size) + " ranks");
        // the same count: the same arithmetic as without the interruption, bit for bit
        check(here, resume(k, np + at, true), tag + ", " + std::to_string(size) + " ranks -> " + std::to_string(size), 0);
      }
      // another run's rank count -> this one
      if (from > 0 && from != size) {
        const std::string file = dir + "/" + k.name + "_np" + std::to_string(from) + at;
        ASSERT_TRUE(std::filesystem::exists(file)) << file << " (written by the run at " << from << " ranks: ctest's dist_np" << from << ")";
        check(here, resume(k, file, size > 1),
              tag + ", " + std::to_string(from) + " ranks (another run) -> " + std::to_string(size));
      }
    }
  }
}

// Mid-epoch at another layout where no batch starts at the same place in the epoch's order:
// every rank refuses with both layouts named, and nothing changes.
TEST(DistResume, MidEpochWithoutABatchBoundaryIsRefused) {
  const std::string dir = checkpoint_dir();
  const Kind k{"mlp", dist_test::mlp_data()};
  const std::string stem = dir + "/refuse_np" + std::to_string(dist::size());
  write_checkpoints(k, dist::size() > 1, stem);  // after batch 2 of 4: position 24 of the order
  Graph g = build(k, dist::size() > 1);
  train::Model m = dist_test::sgd_model(g);
  data::DataLoader l = loader_for(k, dist::size() > 1, 5);  // a global batch of 5 * size(): 24 is no boundary
  io::TensorMap before;
  for (const auto& [name, t] : io::graph_state(g)) before[name] = t.copy();
  try {
    m.load_checkpoint(stem + "_mid.ckpt", &l);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    const std::string what = e.what(), n = std::to_string(dist::size());
    const std::string shards = dist::size() == 1 ? "1 shard" : n + " shards";
    EXPECT_NE(what.find("of a loader of " + shards + " of batch " + std::to_string(kGlobalBatch / dist::size())), std::string::npos) << what;
    EXPECT_NE(what.find("this loader of " + shards + " of batch 5"), std::string::npos) << what;
    EXPECT_NE(what.find("at position 24"), std::string::npos) << what;
  }
  EXPECT_EQ(m.epochs_done(), 0);
  EXPECT_EQ(l.position(), (data::LoaderPosition{0, 0}));
  for (const auto& [name, t] : io::graph_state(g)) EXPECT_TRUE(allclose(t, before.at(name), 0, 0)) << name;
  // the same file at the end of the epoch resumes in any layout
  m.load_checkpoint(stem + "_epoch.ckpt", &l);
  EXPECT_EQ(l.position(), (data::LoaderPosition{2, 0}));
  // a global batch of 24 has a boundary at position 24: after its batch 1
  data::DataLoader l24 = loader_for(k, dist::size() > 1, 24 / dist::size());
  m.load_checkpoint(stem + "_mid.ckpt", &l24);
  EXPECT_EQ(l24.position(), (data::LoaderPosition{1, 1}));
}

}  // namespace
}  // namespace loom

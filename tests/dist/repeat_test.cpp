// Data-parallel fit repeats bit for bit: the same program at the same number of ranks (and
// threads per rank) gives the same parameters and buffers, run after run (docs/distributed.md,
// "Repeatability"). Run at 1, 2 and 3 processes by ctest.
#include <gtest/gtest.h>

#include <string>

#include "dist/dist_test_util.h"
#include "loom/dist/optimizer.h"
#include "loom/loom.h"

namespace loom {
namespace {

// The MLP and the CNN with synchronized batch norm, fitted data-parallel for 3 epochs (12
// steps of a global batch of 12, shuffled) twice from the same seed.
TEST(DistRepeat, FitTwiceGivesTheSameBits) {
  const int size = dist::size();
  ASSERT_EQ(12 % size, 0) << "run with 1, 2, 3, 4, 6 or 12 processes";
  for (const bool cnn : {false, true}) {
    auto ds = cnn ? dist_test::cnn_data() : dist_test::mlp_data();
    auto run = [&] {
      manual_seed(7);
      Graph g = cnn ? dist_test::cnn_graph(true) : dist_test::mlp_graph();
      if (cnn) EXPECT_EQ(nn::sync_batch_norm(g), 2);
      train::Model m = dist_test::sgd_model(g);
      data::DataLoader loader(ds, {.batch_size = 12 / size, .shuffle = true, .seed = 3});
      m.fit(loader, {.epochs = 3, .progress = false, .distributed = dist::data_parallel()});
      return g;
    };
    const Graph first = run(), second = run();
    SCOPED_TRACE(cnn ? "CNN with synchronized batch norm" : "MLP");
    dist_test::compare_state(first, second, 0, 0);  // bit for bit, and the same on every rank
  }
}

}  // namespace
}  // namespace loom

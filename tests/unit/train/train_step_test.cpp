// train::TrainStep: the whole step in one call equals the loop written by hand bit for bit,
// makes no allocation from the system once warm, reports its memory and refuses bad batches.
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/memory.h>
#include <loom/core/node.h>
#include <loom/core/parallel.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/dataset.h>
#include <loom/data/loader.h>
#include <loom/graph/graph.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/lambda.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/merge.h>
#include <loom/nn/mode.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/losses.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/clip.h>
#include <loom/train/history.h>
#include <loom/train/losses.h>
#include <loom/train/model.h>
#include <loom/train/optimizers.h>
#include <loom/train/train_step.h>
#include <loom/zoo/architectures.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;

namespace {

struct Case {
  std::string name;
  std::function<zoo::Network()> build;
  std::function<std::vector<Tensor>(Generator&)> batch;  // inputs, then the target
  tr::LossFn loss;
  double clip = 0;
};

std::vector<Case> cases() {
  auto ce = [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); };
  return {
      {"mlp with dropout", [] { return zoo::mlp(20, {32, 16}, 5, nn::relu, 0.3); },
       [](Generator& g) {
         return std::vector<Tensor>{randn({8, 20}, Float32, default_device(), &g),
                                    randint(0, 5, {8}, Int64, default_device(), &g)};
       },
       ce},
      {"cnn with batch norm and dropout", [] { return zoo::fashion_cnn(10, {.widths = {4, 8}, .hidden = 16}); },
       [](Generator& g) {
         return std::vector<Tensor>{randn({6, 1, 28, 28}, Float32, default_device(), &g),
                                    randint(0, 10, {6}, Int64, default_device(), &g)};
       },
       ce},
      {"lstm language model, clipped", [] { return zoo::lstm_lm(50, 8, 12, 2); },
       [](Generator& g) {
         return std::vector<Tensor>{randint(0, 50, {3, 5}, Int64, default_device(), &g),
                                    randint(0, 50, {15}, Int64, default_device(), &g)};
       },
       [](const Tensor& y, const Tensor& t) { return cross_entropy(y.reshape({-1, 50}), t); }, 0.05},
      {"lstm language model, clipped, sgd", [] { return zoo::lstm_lm(50, 8, 12, 2); },
       [](Generator& g) {
         return std::vector<Tensor>{randint(0, 50, {3, 5}, Int64, default_device(), &g),
                                    randint(0, 50, {15}, Int64, default_device(), &g)};
       },
       [](const Tensor& y, const Tensor& t) { return cross_entropy(y.reshape({-1, 50}), t); }, 0.05},
  };
}

}  // namespace

TEST(TrainStep, EqualsTheHandWrittenLoopBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(3);
    zoo::Network a = c.build();
    manual_seed(3);
    zoo::Network b = c.build();
    // Adam, and SGD with momentum for the clipped model (TrainStep scales inside either update)
    auto make = [&](const std::vector<Tensor>& p) -> std::shared_ptr<tr::Optimizer> {
      if (c.clip > 0 && c.name.find("sgd") != std::string::npos)
        return std::make_shared<tr::SGD>(p, tr::SGDOptions{.lr = 0.5, .momentum = 0.9});
      return std::make_shared<tr::Adam>(p, tr::AdamOptions{.lr = 1e-2});
    };
    auto opt_a = make(a.parameters());
    auto opt_b = make(b.parameters());
    tr::TrainStep step(a.graph, c.loss, opt_a, {.clip_grad_norm = c.clip});
    Plan plan_b = b.graph.compile();
    Generator data_a(9), data_b(9);
    manual_seed(11);  // dropout draws from the default generator
    std::vector<float> losses_a;
    for (int i = 0; i < 4; ++i) losses_a.push_back(step(c.batch(data_a)).loss.item<float>());
    manual_seed(11);
    for (int i = 0; i < 4; ++i) {
      const std::vector<Tensor> batch = c.batch(data_b);
      nn::ModeScope train(nn::Mode::Train);
      opt_b->zero_grad();
      Tensor loss = c.loss(plan_b(batch[0]), batch[1]);
      loss.backward();
      if (c.clip > 0) EXPECT_GT(tr::clip_grad_norm(opt_b->params(), c.clip), c.clip);  // it does clip
      opt_b->step();
      EXPECT_EQ(loss.item<float>(), losses_a[static_cast<size_t>(i)]) << "step " << i;
    }
    const std::vector<Tensor> pa = a.parameters(), pb = b.parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(array_equal(pa[i], pb[i])) << "parameter " << i;
    EXPECT_EQ(step.stats().steps, 4);
    EXPECT_GT(step.stats().arena_served, 0) << "steps 3 and 4 ran on the memory plan";
  }
}

// A training step whose graph holds an elementwise chain runs it as one pass with one recorded
// node (docs/compile.md, elementwise chains): losses and parameters after 4 steps are bit for bit
// those of the links run one by one (a plan compiled without the fusion, the loop by hand). The
// chain's backward recomputes the values between links its rules read (relu's, sigmoid's and
// tanh's outputs, t for the last product); c and b are each read by two links.
TEST(TrainStep, AnElementwiseChainRunsFusedAndEqualsItsLinksBitForBit) {
  auto build = [] {
    manual_seed(7);
    nn::Input x(12, Float32, "x");
    nn::Linear a(x, 16, {}, "a"), b(x, 16, {}, "b"), c(x, 16, {}, "c");
    nn::Multiply ab(a, b, "ab");
    nn::Activation r(nn::Add(ab, c, "abc"), nn::relu, "r");
    nn::Activation s(nn::Subtract(c, r, "d"), nn::sigmoid, "s");  // c read twice by the chain
    nn::Activation t(s, nn::tanh, "t");
    nn::Multiply tb(t, b, "tb");  // a product of a value between links: its backward recomputes it
    nn::Linear y(tb, 4, {}, "y");
    return Graph::build({y}, {x});
  };
  const Graph ga = build(), gb = build();
  auto ce = [](const Tensor& p, const Tensor& l) { return cross_entropy(p, l); };
  auto opt_a = std::make_shared<tr::Adam>(ga.parameters(), tr::AdamOptions{.lr = 1e-2});
  auto opt_b = std::make_shared<tr::Adam>(gb.parameters(), tr::AdamOptions{.lr = 1e-2});
  tr::TrainStep step(ga, ce, opt_a);
  const std::string text = step.dump();
  EXPECT_NE(text.find("fuse   Multiply 'ab' -> Add 'abc' -> Activation 'r' -> Subtract 'd' -> Activation 's' -> Activation 't' -> Multiply 'tb'"),
            std::string::npos)
      << text;
  const Plan links = gb.compile(CompileOptions{.fuse_elementwise = false});
  Generator data(8);
  const Tensor xs = randn({10, 12}, Float32, default_device(), &data), ts = randint(0, 4, {10}, Int64, default_device(), &data);
  for (int i = 0; i < 4; ++i) {
    const tr::TrainStep::Result r = step({xs, ts});
    nn::ModeScope train(nn::Mode::Train);
    opt_b->zero_grad();
    Tensor loss = ce(links(xs), ts);
    loss.backward();
    opt_b->step();
    EXPECT_EQ(loss.item<float>(), r.loss.item<float>()) << "step " << i;
  }
  const std::vector<Tensor> pa = ga.parameters(), pb = gb.parameters();
  ASSERT_EQ(pa.size(), 8u);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(array_equal(pa[i], pb[i])) << "parameter " << i;
  // the chain is one node of the step's graph: the head's input comes from it
  nn::ModeScope train(nn::Mode::Train);
  const Tensor h = step.plan().run({xs})[0];
  ASSERT_TRUE(h.grad_fn());
  auto is_chain = [](const std::shared_ptr<Node>& n) { return n && std::string(n->name()) == "elementwise_chain"; };
  bool chain_node = false;  // the head's input, or the input of its product when the bias is added apart
  for (const auto& n : h.grad_fn()->next)
    chain_node = chain_node || is_chain(n) || (n && std::any_of(n->next.begin(), n->next.end(), is_chain));
  EXPECT_TRUE(chain_node);
}

// At one thread: with several, two threads that need a block of the same size at the same
// moment for the first time (oneDNN's staging buffers) take a second one from the system, on
// whichever step the timing first allows it (seen once in step 3 of a CI run, ctest -j2 with
// other tests competing for the cores); the main job reports how many of its steps were served
// from the cache.
TEST(TrainStep, NoAllocationFromTheSystemOnceWarmAndMemoryAsMemoryStatsSays) {
  const int saved = get_num_threads();
  set_num_threads(1);
  manual_seed(4);
  zoo::Network net = zoo::fashion_cnn(10, {.widths = {8, 16}, .hidden = 32});
  tr::TrainStep step(net.graph, [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); },
                     std::make_shared<tr::SGD>(net.parameters(), tr::SGDOptions{.lr = 0.05, .momentum = 0.9}));
  Generator g(5);
  const std::vector<Tensor> batch{randn({16, 1, 28, 28}, Float32, default_device(), &g),
                                  randint(0, 10, {16}, Int64, default_device(), &g)};
  for (int i = 0; i < 2; ++i) step(batch);  // the optimizer's buffers, the caches
  for (int i = 0; i < 3; ++i) {
    const MemoryStats before = memory_stats();
    step(batch);
    const MemoryStats after = memory_stats();
    EXPECT_EQ(step.stats().system_allocations, 0) << "step " << i;
    EXPECT_GT(step.stats().allocations, 0);
    EXPECT_EQ(step.stats().allocations, after.allocations - before.allocations);
    // the step resets the peak counter at its start: its peak is memory_stats' above the live bytes before it
    EXPECT_EQ(step.stats().peak_bytes, after.peak_bytes - before.current_bytes);
    // at least the activations the forward plan holds at its peak (its estimate counts no saved tensors)
    EXPECT_GT(step.stats().peak_bytes, 16 * 8 * 28 * 28 * 4);
    // the memory plan (recorded by step 2) serves the blocks that live and die inside a step
    EXPECT_GT(step.stats().arena_served, step.stats().allocations / 2) << "step " << i;
    EXPECT_EQ(step.stats().arena_missed, 0) << "step " << i;
    EXPECT_GE(step.stats().arena_bytes, step.stats().arena_planned_peak);
    EXPECT_GT(step.stats().arena_planned_peak, 16 * 8 * 28 * 28 * 4);
  }
  const std::string text = step.dump();
  for (const char* part : {"TrainStep", "forward Plan", "backward: autograd", "update: SGD over", "one pass",
                           "memory (last of 5 steps)", "0 of them from the system", "3 of the 5 steps took every block",
                           "memory plan:", "blocks from it, 0 planned ones elsewhere; 3 of the 5 steps ran on it"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  set_num_threads(saved);
}

TEST(TrainStep, ALossGraphAndModelFitRunThroughIt) {
  manual_seed(6);
  nn::Input x(4, Float32, "x");
  nn::Input t(1, Float32, "t");
  nn::Linear y(x, 1, {}, "y");
  nn::Layer loss = nn::Lambda({y, t}, [](const std::vector<Tensor>& v) { return tr::mse(v[0], v[1]); }, Shape{},
                              Float32, "loss");
  Graph training = Graph::build({loss}, {x, t});
  auto opt = std::make_shared<tr::SGD>(training.parameters(), tr::SGDOptions{.lr = 0.1});
  tr::TrainStep step = tr::TrainStep::from_loss_graph(training, opt);
  Tensor xs = uniform({32, 4}), ts = sum(xs, {1}, true);
  const float first = step({xs, ts}).loss.item<float>();
  for (int i = 0; i < 50; ++i) step({xs, ts});
  EXPECT_LT(step({xs, ts}).loss.item<float>(), first * 0.1f);
  EXPECT_FALSE(step({xs, ts}).prediction.defined());
  // Model::fit runs its steps through one
  manual_seed(6);
  zoo::Network net = zoo::mlp(4, {8}, 3);
  tr::Model model(net.graph, [](const Tensor& p, const Tensor& l) { return cross_entropy(p, l); },
                  std::make_shared<tr::Adam>(net.parameters()));
  auto ds = std::make_shared<data::TensorDataset>(std::vector<Tensor>{uniform({40, 4}), randint(0, 3, {40}, Int64)});
  data::DataLoader loader(ds, {.batch_size = 8});
  model.fit(loader, {.epochs = 2, .progress = false});
  EXPECT_EQ(model.train_step().stats().steps, 10);
}

TEST(TrainStep, BadBatchesAndOptionsAreNamedErrors) {
  zoo::Network net = zoo::mlp(4, {8}, 3);
  auto opt = std::make_shared<tr::SGD>(net.parameters(), tr::SGDOptions{.lr = 0.1});
  auto ce = [](const Tensor& p, const Tensor& l) { return cross_entropy(p, l); };
  tr::TrainStep step(net.graph, ce, opt);
  EXPECT_THROW(
      {
        try {
          step({uniform({2, 4})});
        } catch (const ValueError& e) {
          EXPECT_NE(std::string(e.what()).find("1 input(s) and then the target"), std::string::npos) << e.what();
          throw;
        }
      },
      ValueError);
  EXPECT_THROW(step({uniform({2, 5}), randint(0, 3, {2}, Int64)}), ShapeError);  // the plan names the input
  EXPECT_THROW(tr::TrainStep(net.graph, nullptr, opt), ValueError);
  EXPECT_THROW(tr::TrainStep(net.graph, ce, nullptr), ValueError);
  EXPECT_THROW(tr::TrainStep(net.graph, ce, opt, {.clip_grad_norm = -1}), ValueError);
  EXPECT_EQ(step.stats().steps, 0);
}

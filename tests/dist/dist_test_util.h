#pragma once
// What the dist tests share: the MLP and the CNN of docs/distributed.md's equivalence checks,
// their data, and comparisons of parameters across ranks and runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "loom/dist/optimizer.h"
#include "loom/loom.h"

namespace loom::dist_test {

// Every rank holds the same values as rank 0, bit for bit.
inline void expect_same_everywhere(const Tensor& t, const std::string& what) {
  const Tensor all = dist::allgather(t.detach().expand_dims(0)).astype(Float64);
  for (int r = 1; r < dist::size(); ++r)
    ASSERT_EQ(all[r].to_vector<double>(), all[0].to_vector<double>()) << what << ": rank " << r << " differs from rank 0";
}

// Worst |b - a| / (1e-3 + |a|) over the graphs' parameters and buffers, and each element within
// `atol + rtol |a|`; `many`'s values are the same on every rank.
inline double compare_state(const Graph& one, const Graph& many, double atol, double rtol) {
  const io::TensorMap a = io::graph_state(one), b = io::graph_state(many);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, t] : a) {
    expect_same_everywhere(b.at(name), name);
    const auto x = t.astype(Float64).to_vector<double>(), y = b.at(name).astype(Float64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(x[i] - y[i]) / (1e-3 + std::abs(x[i])));
      EXPECT_NEAR(y[i], x[i], atol + rtol * std::abs(x[i])) << name << " element " << i;
    }
  }
  return worst;
}

inline std::shared_ptr<data::TensorDataset> mlp_data() {
  Generator g(42);
  Tensor labels = randint(0, 3, {48}, Int64, default_device(), &g);
  Tensor x = normal({48, 8}, 0, 1, Float32, default_device(), &g) + labels.astype(Float32).expand_dims(1) * 0.5;
  return std::make_shared<data::TensorDataset>(std::vector<Tensor>{x, labels});
}

inline Graph mlp_graph() {
  nn::Input x(8, Float32, "x");
  nn::Linear h(x, 16, {}, "h");
  nn::Activation a(h, nn::relu, "a");
  nn::Linear out(a, 3, {}, "out");
  return Graph::build({out}, {x});
}

inline train::Model sgd_model(const Graph& g) {
  auto sgd = std::make_shared<train::SGD>(train::parameters(g.outputs()), train::SGDOptions{.lr = 0.1, .momentum = 0.9});
  return train::Model(g, [](const Tensor& y, const Tensor& t) { return train::cross_entropy(y, t); }, sgd,
                      {std::make_shared<train::Accuracy>()});
}

// A small CNN with batch norm: conv -> bn -> relu -> conv -> bn2 -> global pool -> linear.
inline Graph cnn_graph(bool sync_first) {
  nn::Input x(Shape{-1, 2, 6, 6}, Float32, "x");
  nn::Conv2D c(x, 4, {3, 3}, {}, "c");
  nn::BatchNorm bn(c, {.sync = sync_first}, "bn");
  nn::Activation a(bn, nn::relu, "a");
  nn::Conv2D c2(a, 4, {3, 3}, {}, "c2");
  nn::BatchNorm bn2(c2, {}, "bn2");
  nn::GlobalPool p(bn2, nn::GlobalPool::Mode::Avg, "p");
  nn::Linear out(p, 3, {}, "out");
  return Graph::build({out}, {x});
}

// 48 images for the CNN, classes shifted apart.
inline std::shared_ptr<data::TensorDataset> cnn_data() {
  Generator gen(5);
  Tensor labels = randint(0, 3, {48}, Int64, default_device(), &gen);
  Tensor x = normal({48, 2, 6, 6}, 0, 1, Float32, default_device(), &gen) * 2.0 + 1.0 +
             labels.astype(Float32).reshape({48, 1, 1, 1}) * 0.5;
  return std::make_shared<data::TensorDataset>(std::vector<Tensor>{x, labels});
}

}  // namespace loom::dist_test

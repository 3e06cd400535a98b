// Seeded random numbers: reproducible for any thread count, with the right distributions.
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>

#include <algorithm>
#include <cmath>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

std::vector<double> draw_all(uint64_t seed) {
  Generator g(seed);
  std::vector<double> out;
  for (Tensor t : {uniform({100000}, -1, 1, Float32, Device::cpu(), &g), normal({100000}, 0, 1, Float64, Device::cpu(), &g),
                   bernoulli({100000}, 0.3, Float32, Device::cpu(), &g),
                   randint(0, 1000, {100000}, Int64, Device::cpu(), &g), permutation(1000, Device::cpu(), &g)}) {
    std::vector<double> v = t.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

TEST(Random, SameSeedSameNumbersForOneAndTwoThreads) {
  ThreadCountGuard guard;
  set_num_threads(1);
  const std::vector<double> one = draw_all(42);
  set_num_threads(2);
  const std::vector<double> two = draw_all(42);
  EXPECT_EQ(one, two);
  EXPECT_NE(draw_all(43), two);
}

TEST(Random, ManualSeedResetsTheDefaultGenerator) {
  manual_seed(7);
  Tensor a = randn({1000});
  Tensor b = randn({1000});
  manual_seed(7);
  Tensor c = randn({1000});
  EXPECT_TRUE(array_equal(a, c));
  EXPECT_FALSE(array_equal(a, b));  // successive draws differ
  EXPECT_EQ(default_generator().counter(), 1u);
}

TEST(Random, GeneratorStateCanBeRestored) {
  Generator g(5);
  uniform({10}, 0, 1, Float32, Device::cpu(), &g);
  const uint64_t counter = g.counter();
  Tensor first = uniform({10}, 0, 1, Float32, Device::cpu(), &g);
  g.set_state(5, counter);
  EXPECT_TRUE(array_equal(first, uniform({10}, 0, 1, Float32, Device::cpu(), &g)));
}

TEST(Random, UniformRange) {
  Generator g(1);
  for (DType d : {Float32, Float64, Float16, BFloat16}) {
    Tensor u = uniform({50000}, -2.0, 3.0, d, Device::cpu(), &g);
    EXPECT_EQ(u.dtype(), d);
    EXPECT_GE(min(u).item<double>(), -2.0);
    if (d == Float32 || d == Float64) EXPECT_LT(max(u).item<double>(), 3.0);
    else EXPECT_LE(max(u).item<double>(), 3.0);  // 16-bit rounding may reach the bound
    EXPECT_NEAR(mean(u.astype(Float64)).item<double>(), 0.5, 0.05);
  }
  // spread evenly over ten bins
  Tensor u = uniform({100000}, 0, 1, Float64, Device::cpu(), &g);
  Tensor bins = floor(u * 10.0).astype(Int64);
  for (int64_t b = 0; b < 10; ++b) {
    const double frac = sum(equal(bins, scalar_tensor(b))).item<double>() / 100000.0;
    EXPECT_NEAR(frac, 0.1, 0.01) << "bin " << b;
  }
}

TEST(Random, NormalMomentsRoughly) {
  Generator g(2);
  Tensor n = normal({200000}, 3.0, 2.0, Float64, Device::cpu(), &g);
  EXPECT_NEAR(mean(n).item<double>(), 3.0, 0.03);
  EXPECT_NEAR(loom::std(n).item<double>(), 2.0, 0.03);
  // about 68% within one standard deviation
  const double within = mean(less(abs(n - 3.0), scalar_tensor(2.0, Float64)).astype(Float64)).item<double>();
  EXPECT_NEAR(within, 0.6827, 0.01);
  Tensor z = randn({100000}, Float32, Device::cpu(), &g);
  EXPECT_NEAR(mean(z).item<double>(), 0.0, 0.02);
  EXPECT_NEAR(loom::std(z).item<double>(), 1.0, 0.02);
  EXPECT_TRUE(all(equal(normal({100}, 1.5, 0.0, Float32, Device::cpu(), &g), scalar_tensor(1.5f))).item<bool>());
}

TEST(Random, BernoulliRate) {
  Generator g(3);
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    Tensor b = bernoulli({100000}, p, Float32, Device::cpu(), &g);
    const std::vector<float> v = b.to_vector<float>();
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f || x == 1.0f; }));
    EXPECT_NEAR(mean(b).item<double>(), p, 0.01) << "p = " << p;
  }
  Tensor bb = bernoulli({10}, 0.5, Bool, Device::cpu(), &g);
  EXPECT_EQ(bb.dtype(), Bool);
}

TEST(Random, RandintRange) {
  Generator g(4);
  Tensor r = randint(-3, 4, {70000}, Int64, Device::cpu(), &g);
  EXPECT_EQ(min(r).item<int64_t>(), -3);
  EXPECT_EQ(max(r).item<int64_t>(), 3);
  for (int64_t k = -3; k <= 3; ++k)
    EXPECT_NEAR(sum(equal(r, scalar_tensor(k))).item<double>() / 70000.0, 1.0 / 7, 0.01);
  EXPECT_EQ(randint(0, 5, {3}, Int32, Device::cpu(), &g).dtype(), Int32);
}

TEST(Random, PermutationIsAPermutation) {
  Generator g(5);
  for (int64_t n : {0, 1, 2, 10, 1000}) {
    Tensor p = permutation(n, Device::cpu(), &g);
    EXPECT_EQ(p.dtype(), Int64);
    std::vector<int64_t> v = p.to_vector<int64_t>();
    std::sort(v.begin(), v.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], i);
  }
  Tensor a = permutation(1000, Device::cpu(), &g), b = permutation(1000, Device::cpu(), &g);
  EXPECT_FALSE(array_equal(a, b));
  EXPECT_FALSE(array_equal(a, arange(1000)));
}

TEST(Random, ElementsAreIndependentOfShapeSplit) {
  // counter-based: element i of a draw depends only on seed, draw and i
  Generator g1(9), g2(9);
  Tensor flat = uniform({1000}, 0, 1, Float32, Device::cpu(), &g1);
  Tensor shaped = uniform({10, 100}, 0, 1, Float32, Device::cpu(), &g2);
  EXPECT_TRUE(array_equal(flat, shaped.reshape({1000})));
}

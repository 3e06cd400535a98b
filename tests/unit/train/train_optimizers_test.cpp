// Optimizers: state export/import resumes bit-exactly, the fused loop and the tensor-op path
// agree, parameters without gradients are skipped, argument checks, gradient clipping. Parity
// with torch.optim is checked live by the train_reference_pytorch ctest (tests/train).
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/machine.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/nn/activation.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/train/clip.h>
#include <loom/train/losses.h>
#include <loom/train/optimizers.h>
#include <loom/train/regularizers.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

using Factory = std::function<std::unique_ptr<tr::Optimizer>(std::vector<Tensor>)>;

std::vector<std::pair<std::string, Factory>> factories() {
  return {
      {"sgd", [](auto p) { return std::make_unique<tr::SGD>(p, tr::SGDOptions{.lr = 0.1}); }},
      {"sgd_nesterov",
       [](auto p) {
         return std::make_unique<tr::SGD>(p, tr::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
       }},
      {"sgd_dampening",
       [](auto p) {
         return std::make_unique<tr::SGD>(p, tr::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01});
       }},
      {"adam", [](auto p) { return std::make_unique<tr::Adam>(p, tr::AdamOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"adam_plain", [](auto p) { return std::make_unique<tr::Adam>(p, tr::AdamOptions{.lr = 0.01}); }},
      {"adam_amsgrad", [](auto p) { return std::make_unique<tr::Adam>(p, tr::AdamOptions{.lr = 0.01, .amsgrad = true}); }},
      {"adamw", [](auto p) { return std::make_unique<tr::AdamW>(p, tr::AdamWOptions{.lr = 0.01, .amsgrad = true}); }},
      {"adamw_plain", [](auto p) { return std::make_unique<tr::AdamW>(p, tr::AdamWOptions{.lr = 0.01}); }},
      {"rmsprop",
       [](auto p) {
         return std::make_unique<tr::RMSProp>(p, tr::RMSPropOptions{.lr = 0.01, .momentum = 0.9, .centered = true});
       }},
      {"rmsprop_decay",
       [](auto p) { return std::make_unique<tr::RMSProp>(p, tr::RMSPropOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"rmsprop_momentum",
       [](auto p) { return std::make_unique<tr::RMSProp>(p, tr::RMSPropOptions{.lr = 0.01, .momentum = 0.5}); }},
      {"adagrad",
       [](auto p) { return std::make_unique<tr::Adagrad>(p, tr::AdagradOptions{.lr = 0.1, .lr_decay = 0.01}); }},
      {"adagrad_decay",
       [](auto p) {
         return std::make_unique<tr::Adagrad>(
             p, tr::AdagradOptions{.lr = 0.1, .weight_decay = 0.1, .initial_accumulator_value = 0.5, .eps = 1e-6});
       }},
  };
}

struct Model {
  Tensor X, Y, Z;
  std::vector<Tensor> params;
  // `wide` adds a third parameter of 83 values, fitted to Z: long enough for the vector
  // kernels' full blocks (up to 2 x 16 floats) and a tail.
  explicit Model(DType dt = Float32, bool wide = false) {
    Generator g(42);
    X = normal({8, 3}, 0, 1, dt, Device::cpu(), &g);
    Y = normal({8, 2}, 0, 1, dt, Device::cpu(), &g);
    params = {normal({3, 2}, 0, 1, dt, Device::cpu(), &g).requires_grad_(), zeros({2}, dt).requires_grad_()};
    if (wide) {
      Z = normal({83}, 0, 1, dt, Device::cpu(), &g);
      params.push_back(normal({83}, 0, 1, dt, Device::cpu(), &g).requires_grad_());
    }
  }
  void backward() const {
    Tensor loss = tr::mse(matmul(X, params[0]) + params[1], Y);
    if (params.size() > 2) loss = loss + tr::mse(params[2] * params[2], Z);
    loss.backward();
  }
};

void run_steps(tr::Optimizer& opt, const Model& m, int n) {
  for (int i = 0; i < n; ++i) {
    opt.zero_grad();
    m.backward();
    opt.step();
  }
}

}  // namespace

TEST(TrainOptimizers, ExportImportResumesBitExactly) {
  for (DType dt : {Float32, Float64})
    for (auto& [name, make] : factories()) {
      SCOPED_TRACE(name + " " + dtype_name(dt));
      Model resumed(dt);
      auto b = make(resumed.params);
      run_steps(*b, resumed, 3);
      b->set_lr(b->lr() * 0.5);  // the lr is part of the state
      tr::OptimizerState st = b->state_dict();
      // a fresh optimizer (and fresh parameter handles holding the same values)
      std::vector<Tensor> copies;
      for (const Tensor& p : resumed.params) copies.push_back(p.detach().copy().requires_grad_());
      resumed.params = copies;
      auto c = make(resumed.params);
      c->load_state_dict(st);
      EXPECT_EQ(c->steps(), 3);
      EXPECT_EQ(c->lr(), b->lr());
      // the straight run with the same lr change after 3 steps
      Model straight2(dt);
      auto d = make(straight2.params);
      run_steps(*d, straight2, 3);
      d->set_lr(d->lr() * 0.5);
      run_steps(*d, straight2, 2);
      run_steps(*c, resumed, 2);
      for (size_t i = 0; i < copies.size(); ++i) EXPECT_TRUE(array_equal(resumed.params[i], straight2.params[i]));
      // and the state tensors are copies, not views of the live buffers
      for (auto& [k, t] : st.tensors) EXPECT_FALSE(t.shares_storage_with(c->state_dict().tensors.at(k))) << k;
    }
}

TEST(TrainOptimizers, StateKeysFollowPyTorchNames) {
  Model m;
  tr::Adam adam(m.params, {.amsgrad = true});
  run_steps(adam, m, 2);
  tr::OptimizerState s = adam.state_dict();
  for (const char* k : {"0/exp_avg", "0/exp_avg_sq", "0/max_exp_avg_sq", "1/exp_avg"}) EXPECT_TRUE(s.tensors.count(k)) << k;
  EXPECT_EQ(s.counters.at("0/step"), 2);
  EXPECT_EQ(s.counters.at("steps"), 2);
  EXPECT_DOUBLE_EQ(s.scalars.at("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(s.scalars.at("beta2"), 0.999);

  tr::SGD sgd(m.params, {.momentum = 0.9});
  run_steps(sgd, m, 1);
  EXPECT_TRUE(sgd.state_dict().tensors.count("1/momentum_buffer"));
}

TEST(TrainOptimizers, LoadStateChecksKeysAndShapes) {
  Model m;
  tr::Adam adam(m.params);
  tr::OptimizerState s;
  s.tensors["0/exp_avg"] = zeros({5});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { adam.load_state_dict(s); }), {"0/exp_avg", "(5,)", "(3, 2)"}));
  s.tensors.clear();
  s.tensors["7/exp_avg"] = zeros({2});
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { adam.load_state_dict(s); }), {"7/exp_avg", "2 parameters"}));
  s.tensors.clear();
  s.counters["exp_avg"] = 1;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { adam.load_state_dict(s); }), {"exp_avg", "<parameter index>"}));
}

TEST(TrainOptimizers, FusedAndTensorOpPathsAgree) {
  for (DType dt : {Float32, Float64})
    for (auto& [name, make] : factories()) {
      SCOPED_TRACE(name + " " + dtype_name(dt));
      Model a(dt, true), b(dt, true);
      auto oa = make(a.params);
      auto ob = make(b.params);
      ob->set_fused(false);
      run_steps(*oa, a, 4);
      run_steps(*ob, b, 4);
      const double tol = dt == Float32 ? 1e-6 : 1e-14;
      for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(allclose(a.params[i], b.params[i], tol, tol));
    }
}

// The fused updates (the device backend's optimizer kernels) compute the tensor-op path's
// formulas in its order with its roundings, so they agree with it bit for bit: every option set,
// float32 and float64, with and without a step's grad_scale, at lengths around the vector
// widths and the 16 Ki block, next to a parameter of the other dtype and a transposed one (which
// both paths update with tensor ops). The one exception is float32 Adam above the baseline ISA:
// its vector kernel contracts multiply-adds into FMAs (the optimizer_fused_baseline ctest runs
// this test on the baseline build, where Adam is bitwise too).
TEST(TrainOptimizers, FusedUpdatesEqualTheTensorOpPathBitForBit) {
  const std::vector<Shape> shapes{{1}, {5}, {3, 7}, {83}, {16385}};
  for (DType dt : {Float32, Float64})
    for (auto& [name, make] : factories())
      for (double scale : {1.0, 0.37}) {
        SCOPED_TRACE(name + " " + dtype_name(dt) + ", grad_scale " + std::to_string(scale));
        Generator g(5);
        std::vector<Tensor> values;
        for (const Shape& s : shapes) values.push_back(normal(s, 0, 1, dt, Device::cpu(), &g));
        values.push_back(normal({9}, 0, 1, dt == Float32 ? Float64 : Float32, Device::cpu(), &g));
        values.push_back(normal({4, 6}, 0, 1, dt, Device::cpu(), &g));
        std::vector<Tensor> fused, plain;
        for (const Tensor& v : values) {
          const bool transposed = v.ndim() == 2 && v.shape()[0] == 4;
          fused.push_back((transposed ? v.copy().T() : v.copy()).requires_grad_());
          plain.push_back((transposed ? v.copy().T() : v.copy()).requires_grad_());
        }
        ASSERT_FALSE(fused.back().is_contiguous());
        auto of = make(fused), op = make(plain);
        op->set_fused(false);
        for (int step = 0; step < 3; ++step) {
          for (size_t i = 0; i < fused.size(); ++i) {
            const Tensor grad = normal(fused[i].shape(), 0, 1, fused[i].dtype(), Device::cpu(), &g);
            for (Tensor* p : {&fused[i], &plain[i]}) {
              p->zero_grad();
              sum(*p * grad).backward();
            }
          }
          of->step(scale);
          op->step(scale);
        }
        const bool fma_kernel = name.rfind("adam", 0) == 0 && isa_level() != IsaLevel::Baseline;
        auto bitwise = [&](size_t i) { return !fma_kernel || fused[i].dtype() != Float32 || !fused[i].is_contiguous(); };
        for (size_t i = 0; i < fused.size(); ++i) {
          if (bitwise(i)) EXPECT_TRUE(loom_test::same_bytes(fused[i], plain[i])) << i;
          else EXPECT_TRUE(allclose(fused[i], plain[i], 1e-6, 1e-6)) << i;
        }
        const tr::OptimizerState sf = of->state_dict(), sp = op->state_dict();
        ASSERT_EQ(sf.tensors.size(), sp.tensors.size());
        for (const auto& [key, t] : sf.tensors)  // keys "<parameter index>/<name>"
          if (bitwise(std::stoul(key))) EXPECT_TRUE(loom_test::same_bytes(t, sp.tensors.at(key))) << key;
      }
}

// step() runs the fused updates of all parameters as one pass over the pool, in chunks that
// span parameters: every parameter must end exactly as an optimizer over it alone leaves it
// (its own pass), at 1 and 2 threads, with sizes around the chunk grain (16 Ki values), and
// with two parameters that are views of one storage (updated one at a time).
TEST(TrainOptimizers, OnePassOverAllParametersEqualsOnePassPerParameter) {
  const int saved = get_num_threads();
  const std::vector<Shape> shapes{{5}, {16385}, {3, 7}, {40000}, {1}, {128, 130}};
  std::map<std::string, std::vector<Tensor>> one_thread;  // and the same values at 2 threads
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto& [name, make] : factories()) {
      SCOPED_TRACE(name + ", " + std::to_string(threads) + " threads");
      Generator g(7);
      std::vector<Tensor> all, alone;
      for (const Shape& s : shapes) {
        Tensor v = normal(s, 0, 1, Float32, Device::cpu(), &g);
        all.push_back(v.copy().requires_grad_());
        alone.push_back(v.copy().requires_grad_());
      }
      auto together = make(all);
      std::vector<std::unique_ptr<tr::Optimizer>> separate;
      for (const Tensor& p : alone) separate.push_back(make({p}));
      for (int step = 0; step < 3; ++step) {
        for (size_t i = 0; i < shapes.size(); ++i) {
          Tensor grad = normal(shapes[i], 0, 1, Float32, Device::cpu(), &g);
          for (Tensor* p : {&all[i], &alone[i]}) {
            p->zero_grad();
            sum(*p * grad).backward();
          }
        }
        together->step();
        for (auto& o : separate) o->step();
      }
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_TRUE(array_equal(all[i], alone[i])) << shape_str(shapes[i]);
        if (threads == 2) EXPECT_TRUE(array_equal(all[i], one_thread[name][i])) << shape_str(shapes[i]) << " vs 1 thread";
      }
      if (threads == 1) one_thread[name] = all;
    }
  }
  set_num_threads(saved);
  // two parameters that are the halves of one storage
  Tensor base = arange(0, 40000, 1, Float32);
  Tensor lo = slice(base, 0, 0, 20000).requires_grad_(), hi = slice(base, 0, 20000, 40000).requires_grad_();
  ASSERT_TRUE(lo.shares_storage_with(hi));
  tr::Adam opt({lo, hi}, {.lr = 0.5});
  sum(lo * 2.0).backward();
  sum(hi * -1.0).backward();
  opt.step();
  Tensor want_lo = arange(0, 20000, 1, Float32) - 0.5, want_hi = arange(20000, 40000, 1, Float32) + 0.5;
  EXPECT_TRUE(allclose(lo, want_lo, 1e-6, 1e-3));
  EXPECT_TRUE(allclose(hi, want_hi, 1e-6, 1e-3));
}

TEST(TrainOptimizers, NonContiguousParameterUsesTheTensorOpPath) {
  // a transposed leaf: the fused loop does not apply, the update still lands in its storage
  Tensor base = arange(0, 6, 1, Float32).reshape({2, 3});
  Tensor p = base.T();
  ASSERT_FALSE(p.is_contiguous());
  p.requires_grad_();
  tr::SGD opt({p}, {.lr = 0.5});
  sum(p).backward();
  opt.step();
  EXPECT_EQ(loom_test::values(base), (std::vector<double>{-0.5, 0.5, 1.5, 2.5, 3.5, 4.5}));
}

TEST(TrainOptimizers, SkipsParametersWithoutGradient) {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  tr::Adam opt({a, b}, {.lr = 0.1});
  sum(a * 3.0).backward();
  opt.step();
  EXPECT_EQ(loom_test::values(b), (std::vector<double>{1, 1}));
  EXPECT_NEAR(a.at({0}), 0.9, 1e-6);  // Adam's first step moves by lr in the gradient's sign
  tr::OptimizerState s = opt.state_dict();
  EXPECT_TRUE(s.tensors.count("0/exp_avg"));
  EXPECT_FALSE(s.tensors.count("1/exp_avg"));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(TrainOptimizers, ABadGradientUpdatesNoParameter) {
  // the gradient of the last parameter is wrong (set through the internal handle, as a buggy
  // custom backward could): step refuses before touching the first one
  for (auto& [name, make] : factories()) {
    SCOPED_TRACE(name);
    Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
    auto opt = make({a, b});
    sum(a * 3.0 + b).backward();
    b.impl()->grad = zeros({3}).impl();
    const std::string m = error_message<ShapeError>([&] { opt->step(); });
    EXPECT_TRUE(contains_all(m, {"parameter 1", "(3,)", "(2,)", "no parameter was updated"})) << m;
    EXPECT_EQ(loom_test::values(a), (std::vector<double>{1, 1}));
    EXPECT_EQ(opt->state_dict().counters.at("steps"), 0);
  }
}

TEST(TrainOptimizers, SgdStepByHand) {
  // p = 1, g = 2 (loss 2p): momentum 0.5, wd 0.1: d = 2.1; buf = 2.1; p = 1 - 0.1 * 2.1 = 0.79
  Tensor p = ones({1}, Float64).requires_grad_();
  tr::SGD opt({p}, {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1});
  sum(p * 2.0).backward();
  opt.step();
  EXPECT_DOUBLE_EQ(p.at({0}), 1 - 0.1 * 2.1);
  // second step: d = 2 + 0.1 * 0.79 = 2.079; buf = 0.5 * 2.1 + 2.079
  opt.step();
  EXPECT_NEAR(p.at({0}), 0.79 - 0.1 * (0.5 * 2.1 + 2.079), 1e-15);
}

TEST(TrainOptimizers, ArgumentChecks) {
  Tensor leaf = ones({2}).requires_grad_();
  Tensor nonleaf = leaf * 2.0;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::SGD({nonleaf}); }), {"parameter 0", "leaf"}));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { tr::SGD({leaf, leaf}); }), {"parameter 1", "more than once"}));
  EXPECT_TRUE(contains_all(error_message<DTypeError>([&] { tr::SGD({zeros({2}, Int64)}); }), {"floating", "int64"}));
  EXPECT_THROW(tr::SGD({leaf}, {.lr = -1}), ValueError);
  EXPECT_THROW(tr::SGD({leaf}, {.momentum = 0, .nesterov = true}), ValueError);
  EXPECT_THROW(tr::Adam({leaf}, {.beta1 = 1.0}), ValueError);
  tr::Adam opt({leaf});
  opt.set_lr(0.5);
  EXPECT_EQ(opt.lr(), 0.5);
  EXPECT_THROW(opt.set_lr(-0.1), ValueError);
  EXPECT_EQ(tr::AdamW({leaf}).options().weight_decay, 1e-2);
  EXPECT_EQ(tr::AdamW({leaf}).name(), "AdamW");
}

TEST(TrainOptimizers, TrainsALayerGraph) {
  manual_seed(3);
  nn::Input x(2);
  nn::Linear l1(x, 8);
  nn::Activation a1(l1, nn::relu);
  nn::Linear l2(a1, 1);
  Tensor X = uniform({64, 2}, -1, 1);
  Tensor Y = sum(X * X, {1}, true);
  x.set_value(X);
  tr::Adam opt(tr::parameters({l1, l2}), {.lr = 0.05});
  double first = 0, last = 0;
  for (int i = 0; i < 200; ++i) {
    opt.zero_grad();
    Tensor loss = tr::mse(l2(), Y);
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.2);
}

// ---------------------------------------------------------------- clipping

TEST(TrainClip, NormScalesAllGradientsTogether) {
  Tensor a = zeros({2}, Float64).requires_grad_(), b = zeros({1}, Float64).requires_grad_();
  Tensor c = zeros({1}, Float64).requires_grad_();  // no gradient
  sum(a * tensor<double>({3, 0})).backward();
  sum(b * 4.0).backward();
  const double total = tr::clip_grad_norm({a, b, c}, 1.0);
  EXPECT_DOUBLE_EQ(total, 5.0);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_DOUBLE_EQ(a.grad().at({0}), 3 * coef);
  EXPECT_DOUBLE_EQ(b.grad().at({0}), 4 * coef);
  EXPECT_FALSE(c.grad().defined());
  EXPECT_DOUBLE_EQ(tr::clip_grad_norm({a, b}, 1.0, std::numeric_limits<double>::infinity()), 4 * coef);
  EXPECT_EQ(tr::clip_grad_norm({c}, 1.0), 0.0);
}

TEST(TrainClip, SharedGradientTensorIsScaledOnce) {
  // both operands of an add may receive the very same gradient tensor from the engine
  Tensor a = zeros({3}).requires_grad_(), b = zeros({3}).requires_grad_();
  (a + b).backward(full({3}, 2.0));
  tr::clip_grad_norm({a, b}, 1.0);
  const double expect = 2.0 / (std::sqrt(24.0) + 1e-6);
  EXPECT_NEAR(a.grad().at({0}), expect, 1e-7);
  EXPECT_NEAR(b.grad().at({0}), expect, 1e-7);
}

TEST(TrainClip, ValueClampsAndNonFiniteNormThrowsWhenAsked) {
  Tensor a = zeros({3}).requires_grad_();
  sum(a * tensor<float>({-5, 0.5, 7})).backward();
  tr::clip_grad_value({a}, 1.0);
  EXPECT_EQ(loom_test::values(a.grad()), (std::vector<double>{-1, 0.5, 1}));
  Tensor b = zeros({1}).requires_grad_();
  sum(b * std::numeric_limits<double>::infinity()).backward();
  EXPECT_THROW(tr::clip_grad_norm({b}, 1.0, 2.0, true), ValueError);
}

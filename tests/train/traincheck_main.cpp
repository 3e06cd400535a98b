// loom_traincheck OUT.json: runs Loom's optimizers, schedules, losses and gradient clipping on
// deterministic inputs and writes inputs and results as JSON for tests/train/check_train.py to
// replay in PyTorch (torch.optim, torch.optim.lr_scheduler, torch.nn.functional,
// torch.nn.utils) and compare.
#include <loom/loom.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace loom;
namespace tr = loom::train;

namespace {

// ---------------------------------------------------------------- a minimal JSON writer
std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string str(const std::string& s) { return "\"" + s + "\""; }

std::string tensor_json(const Tensor& t) {
  std::vector<double> v = t.detach().to_vector<double>();
  std::string o = "{\"dtype\": " + str(dtype_name(t.dtype())) + ", \"shape\": [";
  for (size_t i = 0; i < t.shape().size(); ++i) o += (i ? ", " : "") + std::to_string(t.shape()[i]);
  o += "], \"data\": [";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + num(v[i]);
  return o + "]}";
}

std::string list_json(const std::vector<Tensor>& ts) {
  std::string o = "[";
  for (size_t i = 0; i < ts.size(); ++i) o += (i ? ", " : "") + tensor_json(ts[i]);
  return o + "]";
}

std::string nums_json(const std::vector<double>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + num(v[i]);
  return o + "]";
}

// An object from pre-rendered values.
struct Obj {
  std::vector<std::pair<std::string, std::string>> kv;
  Obj& set(const std::string& k, const std::string& rendered) {
    kv.emplace_back(k, rendered);
    return *this;
  }
  Obj& s(const std::string& k, const std::string& v) { return set(k, str(v)); }
  Obj& d(const std::string& k, double v) { return set(k, num(v)); }
  Obj& b(const std::string& k, bool v) { return set(k, v ? "true" : "false"); }
  std::string render() const {
    std::string o = "{";
    for (size_t i = 0; i < kv.size(); ++i) o += (i ? ", " : "") + str(kv[i].first) + ": " + kv[i].second;
    return o + "}";
  }
};

std::vector<std::string> cases;

// ---------------------------------------------------------------- optimizers
// A small problem: a linear model W (3, 4), b (4,) fit by mean squared error to fixed data, plus
// a parameter c (2,) whose loss term exists only on even steps (so on odd steps it has no
// gradient and must be skipped). The lr is halved before step 3.
struct Problem {
  Tensor X, Y, c_target;
  std::vector<Tensor> init;
};

Problem make_problem(DType dt) {
  Generator gen(1234);
  Problem p;
  p.X = normal({5, 3}, 0, 1, dt, Device::cpu(), &gen);
  p.Y = normal({5, 4}, 0, 1, dt, Device::cpu(), &gen);
  p.c_target = tensor<double>({0.5, -1.5}).astype(dt);
  p.init = {normal({3, 4}, 0, 0.5, dt, Device::cpu(), &gen), normal({4}, 0, 0.5, dt, Device::cpu(), &gen),
            normal({2}, 0, 1, dt, Device::cpu(), &gen)};
  return p;
}

constexpr int kSteps = 6;

void optimizer_case(const std::string& name, DType dt, bool fused, const Obj& options,
                    const std::function<std::unique_ptr<tr::Optimizer>(std::vector<Tensor>)>& make) {
  Problem pb = make_problem(dt);
  std::vector<Tensor> params;
  for (const Tensor& t : pb.init) params.push_back(t.copy().requires_grad_());
  std::unique_ptr<tr::Optimizer> opt = make(params);
  opt->set_fused(fused);
  std::vector<std::string> traj;
  for (int s = 0; s < kSteps; ++s) {
    if (s == 3) opt->set_lr(opt->lr() * 0.5);
    opt->zero_grad();
    Tensor loss = tr::mse(matmul(pb.X, params[0]) + params[1], pb.Y);
    if (s % 2 == 0) loss = loss + sum(square(params[2] - pb.c_target) * params[2]);
    loss.backward();
    opt->step();
    traj.push_back(list_json(params));
  }
  std::string t = "[";
  for (size_t i = 0; i < traj.size(); ++i) t += (i ? ", " : "") + traj[i];
  t += "]";
  cases.push_back(Obj()
                      .s("kind", "optimizer")
                      .s("name", name)
                      .s("dtype", dtype_name(dt))
                      .b("fused", fused)
                      .set("options", options.render())
                      .set("X", tensor_json(pb.X))
                      .set("Y", tensor_json(pb.Y))
                      .set("c_target", tensor_json(pb.c_target))
                      .set("init", list_json(pb.init))
                      .set("trajectory", t)
                      .render());
}

void optimizer_cases() {
  for (DType dt : {DType::Float32, DType::Float64})
    for (bool fused : {true, false}) {
      auto sgd = [&](Obj o, tr::SGDOptions so) {
        optimizer_case("SGD", dt, fused, o, [so](std::vector<Tensor> p) { return std::make_unique<tr::SGD>(p, so); });
      };
      sgd(Obj().d("lr", 0.1), {.lr = 0.1});
      sgd(Obj().d("lr", 0.1).d("momentum", 0.9), {.lr = 0.1, .momentum = 0.9});
      sgd(Obj().d("lr", 0.05).d("momentum", 0.8).d("dampening", 0.1).d("weight_decay", 0.01),
          {.lr = 0.05, .momentum = 0.8, .dampening = 0.1, .weight_decay = 0.01});
      sgd(Obj().d("lr", 0.1).d("momentum", 0.9).d("weight_decay", 0.001).b("nesterov", true),
          {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true});

      auto adam = [&](Obj o, tr::AdamOptions ao) {
        optimizer_case("Adam", dt, fused, o, [ao](std::vector<Tensor> p) { return std::make_unique<tr::Adam>(p, ao); });
      };
      adam(Obj().d("lr", 0.01), {.lr = 0.01});
      adam(Obj().d("lr", 0.01).d("weight_decay", 0.1), {.lr = 0.01, .weight_decay = 0.1});
      adam(Obj().d("lr", 0.02).b("amsgrad", true), {.lr = 0.02, .amsgrad = true});
      adam(Obj().d("lr", 0.01).set("betas", "[0.8, 0.99]").d("eps", 1e-6).d("weight_decay", 0.05).b("amsgrad", true),
           {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = true});

      auto adamw = [&](Obj o, tr::AdamWOptions ao) {
        optimizer_case("AdamW", dt, fused, o, [ao](std::vector<Tensor> p) { return std::make_unique<tr::AdamW>(p, ao); });
      };
      adamw(Obj().d("lr", 0.01), {.lr = 0.01});
      adamw(Obj().d("lr", 0.02).d("weight_decay", 0.1).b("amsgrad", true), {.lr = 0.02, .weight_decay = 0.1, .amsgrad = true});

      auto rms = [&](Obj o, tr::RMSPropOptions ro) {
        optimizer_case("RMSprop", dt, fused, o, [ro](std::vector<Tensor> p) { return std::make_unique<tr::RMSProp>(p, ro); });
      };
      rms(Obj().d("lr", 0.01), {.lr = 0.01});
      rms(Obj().d("lr", 0.01).b("centered", true), {.lr = 0.01, .centered = true});
      rms(Obj().d("lr", 0.005).d("momentum", 0.9), {.lr = 0.005, .momentum = 0.9});
      rms(Obj().d("lr", 0.005).d("alpha", 0.9).d("eps", 1e-6).d("weight_decay", 0.01).d("momentum", 0.5).b("centered", true),
          {.lr = 0.005, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.01, .momentum = 0.5, .centered = true});

      auto ada = [&](Obj o, tr::AdagradOptions ao) {
        optimizer_case("Adagrad", dt, fused, o, [ao](std::vector<Tensor> p) { return std::make_unique<tr::Adagrad>(p, ao); });
      };
      ada(Obj().d("lr", 0.1), {.lr = 0.1});
      ada(Obj().d("lr", 0.1).d("lr_decay", 0.05), {.lr = 0.1, .lr_decay = 0.05});
      ada(Obj().d("lr", 0.1).d("weight_decay", 0.05).d("initial_accumulator_value", 0.1).d("eps", 1e-6),
          {.lr = 0.1, .weight_decay = 0.05, .initial_accumulator_value = 0.1, .eps = 1e-6});
    }
}

// ---------------------------------------------------------------- schedules
constexpr int kEpochs = 25;

void schedule_case(const std::string& name, const Obj& args, const std::function<std::unique_ptr<tr::Schedule>(tr::Optimizer&)>& make) {
  Tensor w = zeros({1}).requires_grad_();
  tr::SGD opt({w}, {.lr = 0.1});
  std::unique_ptr<tr::Schedule> s = make(opt);
  std::vector<double> lrs{opt.lr()};
  for (int e = 1; e <= kEpochs; ++e) {
    s->step();
    lrs.push_back(opt.lr());
  }
  cases.push_back(
      Obj().s("kind", "schedule").s("name", name).set("args", args.render()).d("base_lr", 0.1).set("lrs", nums_json(lrs)).render());
}

void plateau_case(const Obj& args, tr::PlateauOptions po, const std::vector<double>& values) {
  Tensor w = zeros({1}).requires_grad_();
  tr::SGD opt({w}, {.lr = 0.1});
  tr::ReduceLROnPlateau s(opt, po);
  std::vector<double> lrs;
  for (double v : values) {
    s.step(v);
    lrs.push_back(opt.lr());
  }
  cases.push_back(Obj()
                      .s("kind", "plateau")
                      .set("args", args.render())
                      .d("base_lr", 0.1)
                      .set("values", nums_json(values))
                      .set("lrs", nums_json(lrs))
                      .render());
}

void schedule_cases() {
  schedule_case("StepLR", Obj().d("step_size", 3).d("gamma", 0.5),
                [](tr::Optimizer& o) { return std::make_unique<tr::StepLR>(o, 3, 0.5); });
  schedule_case("StepLR", Obj().d("step_size", 1).d("gamma", 0.9),
                [](tr::Optimizer& o) { return std::make_unique<tr::StepLR>(o, 1, 0.9); });
  schedule_case("ExponentialLR", Obj().d("gamma", 0.9),
                [](tr::Optimizer& o) { return std::make_unique<tr::ExponentialLR>(o, 0.9); });
  schedule_case("CosineAnnealingLR", Obj().d("T_max", 10).d("eta_min", 0.001),
                [](tr::Optimizer& o) { return std::make_unique<tr::CosineAnnealingLR>(o, 10, 0.001); });
  schedule_case("CosineAnnealingLR", Obj().d("T_max", 7).d("eta_min", 0.0),
                [](tr::Optimizer& o) { return std::make_unique<tr::CosineAnnealingLR>(o, 7); });
  schedule_case("LinearWarmup", Obj().d("warmup", 5).d("start_factor", 0.1),
                [](tr::Optimizer& o) { return std::make_unique<tr::LinearWarmup>(o, 5, 0.1); });
  schedule_case("LinearWarmup+CosineAnnealingLR", Obj().d("warmup", 4).d("start_factor", 0.25).d("T_max", 12).d("eta_min", 0.01),
                [](tr::Optimizer& o) {
                  auto cos = std::make_unique<tr::CosineAnnealingLR>(o, 12, 0.01);
                  return std::make_unique<tr::LinearWarmup>(o, 4, 0.25, std::move(cos));
                });
  schedule_case("LinearWarmup+StepLR", Obj().d("warmup", 3).d("start_factor", 0.5).d("step_size", 4).d("gamma", 0.5),
                [](tr::Optimizer& o) {
                  auto step = std::make_unique<tr::StepLR>(o, 4, 0.5);
                  return std::make_unique<tr::LinearWarmup>(o, 3, 0.5, std::move(step));
                });

  const std::vector<double> falling_then_flat{1.0, 0.9, 0.8, 0.8, 0.8, 0.8, 0.79995, 0.8, 0.7, 0.7, 0.7, 0.7,
                                              0.7, 0.7, 0.7, 0.65, 0.65, 0.65, 0.65, 0.65, 0.65, 0.65, 0.65};
  using P = tr::PlateauOptions;
  plateau_case(Obj().s("mode", "min").d("factor", 0.5).d("patience", 2), {.factor = 0.5, .patience = 2}, falling_then_flat);
  plateau_case(Obj().s("mode", "min").d("factor", 0.5).d("patience", 1).d("cooldown", 2).d("min_lr", 0.01),
               {.factor = 0.5, .patience = 1, .cooldown = 2, .min_lr = 0.01}, falling_then_flat);
  plateau_case(Obj().s("mode", "min").d("factor", 0.1).d("patience", 0).d("threshold", 0.05).s("threshold_mode", "abs"),
               {.factor = 0.1, .patience = 0, .threshold = 0.05, .threshold_mode = P::Threshold::Abs}, falling_then_flat);
  std::vector<double> rising;
  for (double v : falling_then_flat) rising.push_back(2.0 - v);
  plateau_case(Obj().s("mode", "max").d("factor", 0.5).d("patience", 2).d("threshold", 0.01),
               {.mode = P::Mode::Max, .factor = 0.5, .patience = 2, .threshold = 0.01}, rising);
  plateau_case(Obj().s("mode", "max").d("factor", 0.3).d("patience", 1).d("threshold", 0.02).s("threshold_mode", "abs").d("cooldown", 1),
               {.mode = P::Mode::Max, .factor = 0.3, .patience = 1, .threshold = 0.02, .threshold_mode = P::Threshold::Abs,
                .cooldown = 1},
               rising);
}

// ---------------------------------------------------------------- losses
// Writes the loss value and the gradients of sum(out * cot) with respect to the
// differentiable inputs (index list `diff`).
void loss_case(const std::string& name, const Obj& args, std::vector<Tensor> inputs, const std::vector<int>& diff,
               const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  for (int i : diff) inputs[i] = inputs[i].copy().requires_grad_();
  Tensor out = f(inputs);
  Generator gen(99);
  Tensor cot = uniform(out.shape(), 0.5, 1.5, out.dtype(), Device::cpu(), &gen);
  std::vector<Tensor> wrt;
  for (int i : diff) wrt.push_back(inputs[i]);
  std::vector<Tensor> grads = wrt.empty() ? std::vector<Tensor>{} : grad(out, wrt, cot);
  std::string d = "[";
  for (size_t i = 0; i < diff.size(); ++i) d += (i ? ", " : "") + std::to_string(diff[i]);
  d += "]";
  cases.push_back(Obj()
                      .s("kind", "loss")
                      .s("name", name)
                      .set("args", args.render())
                      .set("inputs", list_json(inputs))
                      .set("diff", d)
                      .set("out", tensor_json(out))
                      .set("cot", tensor_json(cot))
                      .set("grads", list_json(grads))
                      .render());
}

const char* red_name(Reduction r) { return r == Reduction::None ? "none" : r == Reduction::Sum ? "sum" : "mean"; }

void loss_cases() {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator gen(7);
    auto rn = [&](const Shape& s, double sd = 1.0) { return normal(s, 0, sd, dt, Device::cpu(), &gen); };
    auto un = [&](const Shape& s, double lo, double hi) { return uniform(s, lo, hi, dt, Device::cpu(), &gen); };
    for (Reduction r : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
      Obj a = Obj().s("reduction", red_name(r));
      loss_case("mse", a, {rn({4, 3}), rn({4, 3})}, {0, 1}, [r](auto& x) { return tr::mse(x[0], x[1], r); });
      loss_case("mae", a, {rn({4, 3}), rn({4, 3})}, {0, 1}, [r](auto& x) { return tr::mae(x[0], x[1], r); });
      for (double delta : {1.0, 0.3})
        loss_case("huber", Obj(a).d("delta", delta), {rn({5, 4}, 1.5), rn({5, 4})}, {0, 1},
                  [r, delta](auto& x) { return tr::huber(x[0], x[1], delta, r); });
      Tensor ids = tensor<int64_t>({2, 0, 1, 2, 3});
      for (double ls : {0.0, 0.2}) {
        loss_case("cross_entropy", Obj(a).d("label_smoothing", ls), {rn({5, 4}), ids}, {0},
                  [r, ls](auto& x) { return tr::cross_entropy(x[0], x[1], Tensor(), r, -100, ls); });
        loss_case("cross_entropy", Obj(a).d("label_smoothing", ls), {rn({5, 4}), softmax(rn({5, 4}), 1)}, {0, 1},
                  [r, ls](auto& x) { return tr::cross_entropy(x[0], x[1], Tensor(), r, -100, ls); });
      }
      loss_case("cross_entropy", Obj(a), {rn({3, 4, 2}), tensor<int64_t>({0, 3, 1, 1, 2, 0}).reshape({3, 2})}, {0},
                [r](auto& x) { return tr::cross_entropy(x[0], x[1], Tensor(), r); });
      loss_case("nll", a, {log_softmax(rn({5, 4}), 1), ids}, {0}, [r](auto& x) { return tr::nll_loss(x[0], x[1], Tensor(), r); });
      loss_case("binary_cross_entropy", a, {un({4, 3}, 0.02, 0.98), un({4, 3}, 0, 1)}, {0, 1},
                [r](auto& x) { return tr::binary_cross_entropy(x[0], x[1], r); });
      loss_case("binary_cross_entropy", a, {un({4, 3}, 0.02, 0.98), un({4, 3}, 0, 1), un({3}, 0.5, 2)}, {0},
                [r](auto& x) { return tr::binary_cross_entropy(x[0], x[1], r, x[2]); });
      // probabilities 0 and 1: values only (the clamped log contributes no gradient here)
      loss_case("binary_cross_entropy", a,
                {tensor<double>({0.0, 1.0, 0.0, 1.0, 0.5, 1e-30}).astype(dt), tensor<double>({0, 0, 1, 1, 1, 1}).astype(dt)}, {},
                [r](auto& x) { return tr::binary_cross_entropy(x[0], x[1], r); });
      loss_case("binary_cross_entropy_with_logits", a, {rn({4, 3}, 2), un({4, 3}, 0, 1)}, {0, 1},
                [r](auto& x) { return tr::binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Tensor(), r); });
      loss_case("binary_cross_entropy_with_logits", a, {rn({4, 3}, 2), un({4, 3}, 0, 1), un({3}, 0.5, 3)}, {0, 1},
                [r](auto& x) { return tr::binary_cross_entropy_with_logits(x[0], x[1], Tensor(), x[2], r); });
      loss_case("cosine", a, {rn({4, 5}), rn({4, 5})}, {0, 1}, [r](auto& x) { return tr::cosine(x[0], x[1], r); });
      loss_case("cosine", a, {rn({2, 3, 5}), rn({2, 3, 5})}, {0, 1}, [r](auto& x) { return tr::cosine(x[0], x[1], r); });
      for (double margin : {0.0, 0.3})
        loss_case("cosine_embedding", Obj(a).d("margin", margin), {rn({6, 4}), rn({6, 4}), tensor<int64_t>({1, -1, 1, -1, -1, 1})},
                  {0, 1}, [r, margin](auto& x) { return tr::cosine_embedding(x[0], x[1], x[2], margin, r); });
    }
    const std::pair<tr::KLReduction, const char*> kl_reds[] = {{tr::KLReduction::None, "none"},
                                                                {tr::KLReduction::Sum, "sum"},
                                                                {tr::KLReduction::Mean, "mean"},
                                                                {tr::KLReduction::BatchMean, "batchmean"}};
    for (auto [r, rname] : kl_reds) {  // [r = r]: clang 14 cannot capture a structured binding
      Tensor target = softmax(rn({4, 5}), 1);
      target = where(target < 0.1, 0.0, target);  // exact zeros: 0 log 0 = 0
      loss_case("kl_divergence", Obj().s("reduction", rname).b("log_target", false), {log_softmax(rn({4, 5}), 1), target},
                {0, 1}, [r = r](auto& x) { return tr::kl_divergence(x[0], x[1], r); });
      loss_case("kl_divergence", Obj().s("reduction", rname).b("log_target", true),
                {log_softmax(rn({4, 5}), 1), log_softmax(rn({4, 5}), 1)}, {0, 1},
                [r = r](auto& x) { return tr::kl_divergence(x[0], x[1], r, true); });
    }
    loss_case("cosine_similarity", Obj().d("axis", 1).d("eps", 1e-8), {rn({3, 4, 2}), rn({3, 4, 2})}, {0, 1},
              [](auto& x) { return tr::cosine_similarity(x[0], x[1], 1); });
  }
}

// ---------------------------------------------------------------- clipping
void clip_case(DType dt, double max_norm, double norm_type, bool by_value) {
  Generator gen(5);
  std::vector<Tensor> params{normal({3, 4}, 0, 1, dt, Device::cpu(), &gen).requires_grad_(),
                             normal({4}, 0, 1, dt, Device::cpu(), &gen).requires_grad_(),
                             normal({4}, 0, 1, dt, Device::cpu(), &gen).requires_grad_(),
                             normal({2}, 0, 1, dt, Device::cpu(), &gen).requires_grad_()};
  // params[1] and params[2] enter only as a sum, so the engine may give them one gradient
  // tensor; params[3] gets no gradient at all.
  Tensor loss = sum(square(matmul(ones({2, 3}, dt), params[0]) + params[1] + params[2]) * 3.0) + sum(power(params[0], 3.0));
  loss.backward();
  std::vector<Tensor> before;
  for (size_t i = 0; i < 3; ++i) before.push_back(params[i].grad().copy());
  double total = 0;
  if (by_value) tr::clip_grad_value(params, max_norm);
  else total = tr::clip_grad_norm(params, max_norm, norm_type);
  std::vector<Tensor> after;
  for (size_t i = 0; i < 3; ++i) after.push_back(params[i].grad());
  cases.push_back(Obj()
                      .s("kind", by_value ? "clip_value" : "clip_norm")
                      .s("dtype", dtype_name(dt))
                      .d("max", max_norm)
                      .d("norm_type", norm_type)
                      .set("grads", list_json(before))
                      .set("after", list_json(after))
                      .d("total", total)
                      .render());
}

void clip_cases() {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (double nt : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
      clip_case(dt, 5.0, nt, false);
      clip_case(dt, 1e4, nt, false);
    }
    clip_case(dt, 2.0, 0, true);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: loom_traincheck OUT.json\n";
    return 2;
  }
  optimizer_cases();
  schedule_cases();
  loss_cases();
  clip_cases();
  std::ofstream f(argv[1]);
  f << "[\n";
  for (size_t i = 0; i < cases.size(); ++i) f << cases[i] << (i + 1 < cases.size() ? ",\n" : "\n");
  f << "]\n";
  if (!f) {
    std::cerr << "loom_traincheck: cannot write " << argv[1] << "\n";
    return 1;
  }
  std::cout << "loom_traincheck: " << cases.size() << " cases written to " << argv[1] << "\n";
  return 0;
}

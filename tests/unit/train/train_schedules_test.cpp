// Learning-rate schedules: closed forms by hand and ReduceLROnPlateau's state. The sequences
// are checked against torch.optim.lr_scheduler by the train_reference_pytorch ctest.
#include <gtest/gtest.h>
#include <loom/core/dim_vector.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/train/optimizers.h>
#include <loom/train/schedules.h>

#include <cmath>
#include <numbers>

#include "unit/common/core_test_util.h"

using namespace loom;
namespace tr = loom::train;

namespace {
struct Fixture {
  Tensor w = zeros({1}).requires_grad_();
  tr::SGD opt{{w}, {.lr = 1.0}};
};
}  // namespace

TEST(TrainSchedules, ClosedForms) {
  {
    Fixture f;
    tr::StepLR s(f.opt, 2, 0.5);
    std::vector<double> lrs{f.opt.lr()};
    for (int i = 0; i < 5; ++i) s.step(), lrs.push_back(f.opt.lr());
    EXPECT_EQ(lrs, (std::vector<double>{1, 1, 0.5, 0.5, 0.25, 0.25}));
    EXPECT_EQ(s.last_epoch(), 5);
  }
  {
    Fixture f;
    tr::CosineAnnealingLR s(f.opt, 4, 0.2);
    for (int i = 0; i < 4; ++i) s.step();
    EXPECT_NEAR(f.opt.lr(), 0.2, 1e-15);
    s.step();
    EXPECT_NEAR(f.opt.lr(), 0.2 + 0.8 * (1 + std::cos(std::numbers::pi * 5 / 4)) / 2, 1e-15);
  }
  {
    Fixture f;
    auto after = std::make_unique<tr::ExponentialLR>(f.opt, 0.5);
    tr::LinearWarmup s(f.opt, 4, 0.0, std::move(after));
    std::vector<double> lrs{f.opt.lr()};
    for (int i = 0; i < 6; ++i) s.step(), lrs.push_back(f.opt.lr());
    EXPECT_EQ(lrs, (std::vector<double>{0, 0.25, 0.5, 0.75, 1, 0.5, 0.25}));
  }
}

TEST(TrainSchedules, StateResumes) {
  Fixture a, b;
  tr::CosineAnnealingLR sa(a.opt, 10);
  for (int i = 0; i < 3; ++i) sa.step();
  tr::ScheduleState st = sa.state_dict();
  b.opt.load_state_dict(a.opt.state_dict());
  tr::CosineAnnealingLR sb(b.opt, 10);
  sb.load_state_dict(st);
  sa.step();
  sb.step();
  EXPECT_EQ(a.opt.lr(), b.opt.lr());
}

TEST(TrainSchedules, Plateau) {
  Fixture f;
  tr::ReduceLROnPlateau s(f.opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.3});
  for (double v : {1.0, 1.0}) s.step(v);
  EXPECT_EQ(f.opt.lr(), 1.0);  // one bad epoch: within patience
  s.step(1.0);                 // two: cut
  EXPECT_EQ(f.opt.lr(), 0.5);
  EXPECT_TRUE(s.in_cooldown());
  s.step(1.0);  // cooldown
  s.step(1.0);
  EXPECT_EQ(f.opt.lr(), 0.5);
  s.step(1.0);
  EXPECT_EQ(f.opt.lr(), 0.3);  // floored at min_lr
  s.step(0.5);
  EXPECT_EQ(s.best(), 0.5);
  tr::ScheduleState st = s.state_dict();
  tr::ReduceLROnPlateau t(f.opt, s.options());
  t.load_state_dict(st);
  EXPECT_EQ(t.best(), 0.5);
  EXPECT_EQ(t.last_epoch(), s.last_epoch());
}

TEST(TrainSchedules, Errors) {
  Fixture f;
  EXPECT_THROW(tr::StepLR(f.opt, 0), ValueError);
  EXPECT_THROW(tr::CosineAnnealingLR(f.opt, 0), ValueError);
  EXPECT_THROW(tr::LinearWarmup(f.opt, 0), ValueError);
  EXPECT_THROW(tr::ReduceLROnPlateau(f.opt, {.factor = 1.0}), ValueError);
  Fixture g;
  EXPECT_THROW(tr::LinearWarmup(f.opt, 3, 0.1, std::make_unique<tr::StepLR>(g.opt, 2)), ValueError);
}

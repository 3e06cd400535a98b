// Neural-network ops: forward values against PyTorch, float64 finite-difference gradient
// checks, oneDNN (float32) against the plain float64 kernels, error messages and state.
#include <gtest/gtest.h>
#include <loom/autograd/autograd.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/grad_mode.h>
#include <loom/core/node.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/attention.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/indexing.h>
#include <loom/ops/linalg.h>
#include <loom/ops/losses.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/nn.h>
#include <loom/ops/normalization.h>
#include <loom/ops/pooling.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/registry.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

// The expected values below were printed by PyTorch 1.13 (Debian's python3-torch) with
//   /usr/bin/python3 tests/unit/autograd/nn_ops_expected.py
// from the same deterministic inputs (wave() on both sides).
// kConv2dBasic
const std::vector<double> kConv2dBasic = {-0.326117346620116, 1.5763525500123354, 3.2318895824883898, 3.276892842485864, 4.124181932857754, 6.301883872296003, 5.436612627128226, 1.9508957085815366, 2.1317917236613426, -0.4234108911407212, -2.5794064918045936, -3.321984656513367, -2.826891380536211, -4.678111245799341, -4.234639231641062, -1.810443389784733, 1.9316591725030334, 0.22247258672165016, -1.5055211794180337, -1.8340088687693776, -2.760772243595506, -5.234153785279506, -4.718310590558753, -1.2562517881946795, -1.5509159168581297, 0.6469599009976916, 2.897302508180812, 4.074828371299306, 3.906550586216698, 5.9320599197089106, 5.694175772630075, 3.3363895147437312, -0.504299343423925, 0.9889376614833567, 2.76647248102843, 3.3740883809755386, 4.3680358262582, 7.1042963769934016, 6.944722054686303, 3.5522332427863437, 3.9567578152904437, 2.145355785808863, -0.16949105145056398, -1.7663489280707747, -1.9271182391078554, -4.100055876653725, -4.070914282255511, -1.8108052419740237};
// conv2d complex: (2, 6, 3, 3)
constexpr double kConv2dComplexProj = 6.030648091271548;
// conv2d same: (1, 2, 5, 6)
constexpr double kConv2dSameProj = 2.3357695164850374;
// kConv1d
const std::vector<double> kConv1d = {2.2921673927481327, 1.6861192769439204, -0.5405774214577963, -1.5400285302814791, 0.44850346272658526, -1.759948492401732, -2.0786036692294805, -0.10421072519719532, -1.1998017623799, -0.8480752464083817, 1.3419256596408609, 2.568744527613055, 0.3620833952226108, 2.611039582302969, 3.181891567292267, 1.3487770135292845, -0.11796336526022361, -2.3410261187528363, -2.7421206961534557, -0.8038323164864651, -1.1065075602973655, -0.8032360203898377, 1.3768440257476706, 2.6439210424892927, 1.0312565506904599, 3.2892435428715814, 3.9413924589502685, 2.149018530019085, 2.174019328105929, 2.1307737592952245, 0.025794081667499608, -1.4476896916466049};
// conv_transpose2d: (1, 4, 6, 6)
constexpr double kConvT2dProj = -8.62479700711682;
// conv_transpose2d b: (1, 2, 5, 5)
constexpr double kConvT2dProjB = 2.8847098184389304;
// kMaxPool
const std::vector<double> kMaxPool = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, -1.0};
// kMaxPoolIdx
const std::vector<double> kMaxPoolIdx = {5.0, 2.0, 3.0, 5.0, 6.0, 19.0, 20.0, 21.0, 19.0, 0.0, 1.0, 9.0, 11.0, 11.0, 13.0, 15.0, 16.0, 18.0};
// kMaxPoolGrad
const std::vector<double> kMaxPoolGrad = {0.0, 0.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
// max_pool dil ceil: (1, 1, 4, 4)
constexpr double kMaxPoolDilCeilProj = -0.7584712196791263;
// kAvgPool
const std::vector<double> kAvgPool = {0.2459900956733352, 0.3759197872059956, 0.19251667636399253, -0.07322419757056431, -0.14073953186487095, -0.09094709619081112, 0.12066651260348878, 0.3288073537683121, 0.26288406448829, -0.22610291232262864, -0.3830495570358993, -0.2207206668099505, 0.06077346042592935, 0.13433419730460897, 0.09592607292954683, -0.07820893556813933, -0.28960405739029377, -0.2596113779593882};
// kAvgPoolNoPadCount
const std::vector<double> kAvgPoolNoPadCount = {0.5534777152650042, 0.5638796808089934, 0.4331625218189832, -0.10983629635584646, -0.14073953186487095, -0.13642064428621667, 0.27149965335784976, 0.4932110306524682, 0.5914891450986525, -0.5087315527259144, -0.574574335553849, -0.4966215003223886, 0.09116019063889402, 0.13433419730460897, 0.14388910939432023, -0.1759701050283135, -0.4344060860854406, -0.5841256004086235};
// avg ceil: (1, 2, 3, 3)
// kAvgPoolCeil
const std::vector<double> kAvgPoolCeil = {0.17146552194178288, 0.3943599885900509, 0.2887750145459888, -0.04576895942831002, -0.13776183785462148, -0.13642064428621667, 0.05771406602395481, 0.29545690109427647, 0.39432609673243496, -0.15074490646029712, -0.38898314279448254, -0.33108100021492576, 0.03478316568247972, 0.12671754333549212, 0.14388910939432023, -0.02342535388265493, -0.24553148747905373, -0.38941706693908235};
constexpr double kBatchNormTrainProj = -2.281671315903287;
// kBatchNormRunMean
const std::vector<double> kBatchNormRunMean = {0.07558397124202514, 0.33352529794264757, 0.5357781185358593};
// kBatchNormRunVar
const std::vector<double> kBatchNormRunVar = {1.1578634059693516, 1.4732106868134658, 1.8941775455151273};
constexpr double kBatchNormEvalProj = -2.5046052104362606;
constexpr double kLayerNormProj = 5.1011902404758604;
// kEmbeddingGrad
const std::vector<double> kEmbeddingGrad = {-0.8715757724135877, -0.33823492538664157, 0.3541830921161385, -0.87969575997167, -0.9791777291513174, -0.6181371122370347, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.016813900484349713, 0.6569865987187891, 0.9881682338770003};
constexpr double kCeMean = 2.7163372459113666;
constexpr double kCeSum = 10.865348983645466;
// kCeNone
const std::vector<double> kCeNone = {2.57741787659083, 2.1128389756305195, 1.6635519462903785, 4.511540185133738};
constexpr double kCeIgnore = 2.917503336004982;
constexpr double kCeWeightIgnore = 2.6480627138326986;
constexpr double kCeSmooth = 2.6557174819807394;
constexpr double kCeSmoothIgnore = 2.744357482974673;
constexpr double kCeSmoothWeightIgnore = 2.5105322261151124;
// kCeSmoothWeightIgnoreNone
const std::vector<double> kCeSmoothWeightIgnoreNone = {3.2078255986148134, 0.0, 1.6771904094920254, 2.58561794389966};
constexpr double kCeSmoothWeightIgnoreSum = 7.470633952006498;
constexpr double kCe3d = 1.4150458948988165;
constexpr double kCeProbs = 1.908049287201656;
constexpr double kNllWeight = 2.4917562622665237;
// kNllNone
const std::vector<double> kNllNone = {3.5449220461670112, 2.593525615080806, 0.0, 2.6497727886901994};
constexpr double kBceMean = 0.732962719020775;
// kBcePosWeightNone
const std::vector<double> kBcePosWeightNone = {1.099980888316503, 0.6771327901457069, 0.5541824624739445, 0.5832851239522605, 0.6320493840881228, 0.636935574510545, 4.0421553353293325, 2.5898487183610586, 1.2800960472177152, 0.8356260261301426, 0.8963711423865768, 0.7370377117042664};
constexpr double kBceLarge = 600.0;
// kSdpa
const std::vector<double> kSdpa = {0.04772047305738074, 0.49511012082340855, 0.1706698098773671, 0.5275791487095413, 0.27803678536359655, 0.08511080877388144, 0.3022430438346656, -0.27517274893255694, -0.36643270069504297, -0.42471029356087286, -0.6898092185046889, -0.5152271722202173};
constexpr double kSdpaBoolProj = 0.3665558735548541;
constexpr double kSdpaFloatProj = 0.40046393496744787;
constexpr double kSdpaCausalProj = 2.2827436324387325;

// sin(arange(n) * a + b) in float64, reshaped: the same inputs as nn_ops_expected.py.
Tensor wave(const Shape& shape, double a, double b, DType dtype = Float64) {
  NoGrad off;
  Tensor t = sin(arange(shape_numel(shape)).astype(Float64) * a + b).reshape(shape);
  return t.astype(dtype);
}

// sum(y * wave(y.shape, 0.7, 0.0)) in float64.
double proj(const Tensor& y) {
  NoGrad off;
  return sum(y.astype(Float64) * wave(y.shape(), 0.7, 0.0)).item<double>();
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol) {
  std::vector<double> got = t.astype(Float64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}

void expect_near_rel(double got, double want, double tol) { EXPECT_NEAR(got, want, tol * (1 + std::abs(want))); }

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks the autograd gradients of sum(f(inputs) * c) (c a fixed cotangent) with respect to
// every input flagged in `diff` against central differences; all inputs are float64.
void gradcheck(const Fn& f, const std::vector<Tensor>& inputs, std::vector<bool> diff = {}, double eps = 1e-6,
               double tol = 1e-6) {
  if (diff.empty()) diff.assign(inputs.size(), true);
  std::vector<Tensor> leaves, wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i].copy();
    if (diff[i]) {
      t.requires_grad_(true);
      wrt.push_back(t);
    }
    leaves.push_back(t);
  }
  Tensor y = f(leaves);
  ASSERT_TRUE(y.requires_grad());
  const Tensor c = wave(y.shape(), 0.61, 0.3);
  auto loss_of = [&](const std::vector<Tensor>& xs) {
    NoGrad off;
    return sum(f(xs) * c).item<double>();
  };
  std::vector<Tensor> grads = grad(sum(y * c), wrt);
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!diff[i]) continue;
    std::vector<double> g = grads[k++].to_vector<double>();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      std::vector<Tensor> xs;
      for (const Tensor& t : inputs) xs.push_back(t.copy());
      xs[i].data<double>()[j] += eps;
      const double up = loss_of(xs);
      xs[i].data<double>()[j] -= 2 * eps;
      const double down = loss_of(xs);
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(g[j], numeric, tol * (1 + std::abs(numeric))) << "input " << i << " element " << j;
    }
  }
}

// Relative distance between a float32 result and its float64 reference.
double rel_err(const Tensor& a, const Tensor& b) {
  NoGrad off;
  Tensor a64 = a.astype(Float64), b64 = b.astype(Float64);
  const double num = max(abs(a64 - b64)).item<double>();
  const double den = max(abs(b64)).item<double>();
  return num / (den + 1e-12);
}

}  // namespace

// ------------------------------------------------------------------ forward values vs PyTorch
TEST(NNForward, Conv2dMatchesTorch) {
  for (DType dt : {Float32, Float64}) {
    const double tol = dt == Float32 ? 2e-5 : 1e-11;
    Tensor y = conv2d(wave({1, 2, 4, 4}, 0.37, 0.1, dt), wave({3, 2, 3, 3}, 0.53, 0.2, dt), wave({3}, 0.91, 0.3, dt),
                      1, 1);
    EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 4}));
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, kConv2dBasic, tol);

    y = conv2d(wave({2, 4, 6, 5}, 0.37, 0.1, dt), wave({6, 2, 3, 2}, 0.53, 0.2, dt), wave({6}, 0.91, 0.3, dt), {2, 1},
               {1, 0}, {1, 2}, 2);
    EXPECT_EQ(y.shape(), (Shape{2, 6, 3, 3}));
    expect_near_rel(proj(y), kConv2dComplexProj, tol * 10);

    y = conv2d(wave({1, 2, 5, 6}, 0.37, 0.1, dt), wave({2, 2, 4, 3}, 0.53, 0.2, dt), Tensor(), 1, "same", {1, 2});
    EXPECT_EQ(y.shape(), (Shape{1, 2, 5, 6}));
    expect_near_rel(proj(y), kConv2dSameProj, tol * 10);

    y = conv2d(wave({1, 2, 5, 6}, 0.37, 0.1, dt), wave({2, 2, 4, 3}, 0.53, 0.2, dt), Tensor(), 1, "valid");
    EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 4}));
  }
}

TEST(NNForward, Conv1dMatchesTorch) {
  for (DType dt : {Float32, Float64}) {
    Tensor y = conv1d(wave({2, 3, 7}, 0.37, 0.1, dt), wave({4, 3, 3}, 0.53, 0.2, dt), wave({4}, 0.91, 0.3, dt), 2, 1);
    EXPECT_EQ(y.shape(), (Shape{2, 4, 4}));
    expect_values(y, kConv1d, dt == Float32 ? 2e-5 : 1e-11);
  }
}

TEST(NNForward, Conv2dTransposeMatchesTorch) {
  for (DType dt : {Float32, Float64}) {
    const double tol = dt == Float32 ? 2e-4 : 1e-10;
    Tensor x = wave({1, 4, 3, 3}, 0.37, 0.1, dt), w = wave({4, 2, 3, 3}, 0.53, 0.2, dt);
    Tensor y = conv2d_transpose(x, w, wave({4}, 0.91, 0.3, dt), 2, 1, 1, 2);
    EXPECT_EQ(y.shape(), (Shape{1, 4, 6, 6}));
    expect_near_rel(proj(y), kConvT2dProj, tol);
    Tensor w2 = slice(w, 2, 0, 2);  // (4, 2, 2, 3)
    y = conv2d_transpose(x, w2, Tensor(), {1, 2}, {0, 1}, 0, 1, {2, 1});
    EXPECT_EQ(y.shape(), (Shape{1, 2, 5, 5}));
    expect_near_rel(proj(y), kConvT2dProjB, tol);
  }
}

TEST(NNForward, MaxPoolMatchesTorchIncludingTies) {
  for (DType dt : {Float32, Float64}) {
    Tensor x = floor(wave({1, 2, 5, 5}, 0.37, 0.1, dt) * 2.0);  // many ties
    x.requires_grad_(true);
    auto [y, idx] = max_pool2d_with_indices(x, 3, 2, 1);
    EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 3}));
    EXPECT_EQ(idx.dtype(), Int64);
    expect_values(y, kMaxPool, 0);
    expect_values(idx, kMaxPoolIdx, 0);
    y.backward(ones_like(y));
    expect_values(x.grad(), kMaxPoolGrad, 0);  // ties: the first maximum gets the gradient
  }
  Tensor y = max_pool2d(wave({1, 1, 6, 7}, 0.37, 0.1), {2, 3}, 2, 1, {2, 1}, true);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  expect_near_rel(proj(y), kMaxPoolDilCeilProj, 1e-12);
  // unbatched (C, H, W)
  EXPECT_EQ(max_pool2d(wave({2, 5, 5}, 0.1, 0), 2).shape(), (Shape{2, 2, 2}));
}

// The 2x2 / stride 2 fast path keeps PyTorch's rules: the first maximum wins a tie, the last
// NaN wins, and an all -inf window reports its first position.
TEST(NNForward, MaxPool2x2FastPathTiesAndNaN) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {Float32, Float64}) {
    Tensor x = tensor<double>({1, 1, 2, nan, 1, 0, nan, nan, 3, 5, -inf, -inf, 5, 4, -inf, -inf}).astype(dt).reshape({1, 1, 4, 4});
    x.requires_grad_(true);
    auto [y, idx] = max_pool2d_with_indices(x, 2);
    expect_values(idx, {0, 7, 9, 10}, 0);
    EXPECT_EQ(y.index({0, 0, 0, 0}).item<double>(), 1.0);
    EXPECT_TRUE(std::isnan(y.index({0, 0, 0, 1}).item<double>()));
    EXPECT_EQ(y.index({0, 0, 1, 0}).item<double>(), 5.0);
    EXPECT_EQ(y.index({0, 0, 1, 1}).item<double>(), -inf);
    y.backward(ones_like(y));
    expect_values(x.grad(), {1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0}, 0);
  }
}

TEST(NNForward, AvgPoolMatchesTorch) {
  Tensor x = wave({1, 2, 5, 5}, 0.37, 0.1);
  expect_values(avg_pool2d(x, 3, 2, 1), kAvgPool, 1e-12);
  expect_values(avg_pool2d(x, 3, 2, 1, false, false), kAvgPoolNoPadCount, 1e-12);
  Tensor y = avg_pool2d(x, {3, 2}, 2, 1, true);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 3}));
  expect_values(y, kAvgPoolCeil, 1e-12);
  expect_values(avg_pool2d(x.astype(Float32), 3, 2, 1), kAvgPool, 1e-6);
}

TEST(NNForward, GlobalPools) {
  Tensor x = wave({2, 3, 4, 5}, 0.37, 0.1);
  Tensor a = global_avg_pool2d(x), m = global_max_pool2d(x);
  EXPECT_EQ(a.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(m.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_TRUE(allclose(a, mean(x, {2, 3}, true)));
  EXPECT_TRUE(allclose(m, max(x, {2, 3}, true)));
}

TEST(NNForward, BatchNormTrainingUpdatesRunningStats) {
  Tensor x = wave({4, 3, 2, 2}, 0.37, 0.1) * 2.0 + 0.5;
  Tensor rm = wave({3}, 0.3, 0.0), rv = square(wave({3}, 0.5, 0.2)) + 1.0;
  Tensor w = wave({3}, 0.91, 0.3), b = wave({3}, 0.2, 0.4);
  Tensor y = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
  expect_near_rel(proj(y), kBatchNormTrainProj, 1e-10);
  expect_values(rm, kBatchNormRunMean, 1e-12);  // updated in place
  expect_values(rv, kBatchNormRunVar, 1e-12);   // with the unbiased batch variance

  // eval: uses (and leaves unchanged) the running statistics
  const std::vector<double> rm_before = rm.to_vector<double>(), rv_before = rv.to_vector<double>();
  y = batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
  expect_near_rel(proj(y), kBatchNormEvalProj, 1e-10);
  EXPECT_EQ(rm.to_vector<double>(), rm_before);
  EXPECT_EQ(rv.to_vector<double>(), rv_before);

  // float32 input with float32 running stats
  Tensor rm32 = wave({3}, 0.3, 0.0, Float32), rv32 = (square(wave({3}, 0.5, 0.2)) + 1.0).astype(Float32);
  y = batch_norm(x.astype(Float32), rm32, rv32, w.astype(Float32), b.astype(Float32), true);
  EXPECT_EQ(y.dtype(), Float32);
  expect_near_rel(proj(y), kBatchNormTrainProj, 1e-5);
  expect_values(rm32, kBatchNormRunMean, 1e-6);
  expect_values(rv32, kBatchNormRunVar, 1e-6);

  // training without running statistics: nothing to update
  y = batch_norm(x, Tensor(), Tensor(), w, b, true);
  expect_near_rel(proj(y), kBatchNormTrainProj, 1e-10);
}

TEST(NNForward, LayerNormMatchesTorch) {
  Tensor x = wave({2, 3, 4}, 0.37, 0.1) * 3.0;
  Tensor y = layer_norm(x, {3, 4}, wave({3, 4}, 0.91, 0.3), wave({3, 4}, 0.2, 0.4));
  expect_near_rel(proj(y), kLayerNormProj, 1e-10);
  // without affine parameters each row has mean 0 and (biased) variance 1 (up to eps)
  Tensor z = layer_norm(x, {4});
  EXPECT_TRUE(allclose(mean(z, {-1}), zeros({2, 3}, Float64), 0, 1e-12));
  EXPECT_TRUE(allclose(var(z, {-1}), ones({2, 3}, Float64), 1e-4, 1e-4));
}

TEST(NNForward, EmbeddingGradientAccumulatesAndSkipsPadding) {
  Tensor w = wave({5, 3}, 0.37, 0.1);
  w.requires_grad_(true);
  Tensor ids = from_vector<int64_t>({0, 2, 0, 4, 2, 1}, {2, 3});
  Tensor y = embedding(w, ids, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(array_equal(y.detach(), take(w.detach(), ids, 0)));
  y.backward(wave({2, 3, 3}, 0.7, 0.0));
  expect_values(w.grad(), kEmbeddingGrad, 1e-12);
  // int32 ids, no padding
  Tensor y2 = embedding(w.detach(), ids.astype(Int32));
  EXPECT_TRUE(array_equal(y2, y.detach()));
}

// A gradient large enough for the row-wise index_add to split its columns over the threads
// (repeated ids in every block) equals one_hot(ids)^T g, for 1 and 2 threads.
TEST(NNForward, EmbeddingGradientOfALargeBatchMatchesOneHotProduct) {
  const int saved = get_num_threads();
  Tensor ids = from_vector<int64_t>([] {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < 400; ++i) v.push_back((i * 37) % 50);
    return v;
  }(), {20, 20});
  Tensor g = wave({20, 20, 200}, 0.37, 0.1, Float64);
  Tensor one_hot = equal(expand_dims(ids.reshape({400}), 1), arange(300, Int64)).astype(Float64);  // (400, 300)
  Tensor want = matmul(transpose(one_hot), g.reshape({400, 200}));
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor w = zeros({300, 200}, Float64);
    w.requires_grad_(true);
    embedding(w, ids).backward(g);
    EXPECT_TRUE(allclose(w.grad(), want, 1e-12, 1e-12)) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(NNForward, CrossEntropyMatchesTorch) {
  Tensor logits = wave({4, 5}, 0.37, 0.1) * 3.0;
  Tensor tgt = from_vector<int64_t>({1, 2, 4, 0}, {4});
  Tensor cw = square(wave({5}, 0.91, 0.3)) + 0.5;
  const double tol = 1e-12;
  expect_near_rel(cross_entropy(logits, tgt).item<double>(), kCeMean, tol);
  expect_near_rel(cross_entropy(logits, tgt, Tensor(), Reduction::Sum).item<double>(), kCeSum, tol);
  expect_values(cross_entropy(logits, tgt, Tensor(), Reduction::None), kCeNone, tol);
  expect_near_rel(cross_entropy(logits, tgt, Tensor(), Reduction::Mean, 2).item<double>(), kCeIgnore, tol);
  expect_near_rel(cross_entropy(logits, tgt, cw, Reduction::Mean, 2).item<double>(), kCeWeightIgnore, tol);
  expect_near_rel(cross_entropy(logits, tgt, Tensor(), Reduction::Mean, -100, 0.1).item<double>(), kCeSmooth, tol);
  expect_near_rel(cross_entropy(logits, tgt, Tensor(), Reduction::Mean, 2, 0.2).item<double>(), kCeSmoothIgnore, tol);
  expect_near_rel(cross_entropy(logits, tgt, cw, Reduction::Mean, 2, 0.2).item<double>(), kCeSmoothWeightIgnore, tol);
  expect_values(cross_entropy(logits, tgt, cw, Reduction::None, 2, 0.2), kCeSmoothWeightIgnoreNone, tol);
  expect_near_rel(cross_entropy(logits, tgt, cw, Reduction::Sum, 2, 0.2).item<double>(), kCeSmoothWeightIgnoreSum,
                  tol);
  // (N, C, d) logits
  Tensor logits3 = wave({2, 4, 3}, 0.37, 0.1) * 2.0;
  Tensor tgt3 = from_vector<int64_t>({0, 3, 1, 2, 2, 3}, {2, 3});
  expect_near_rel(cross_entropy(logits3, tgt3, Tensor(), Reduction::Mean, 3, 0.1).item<double>(), kCe3d, tol);
  // class-probability targets
  Tensor probs = softmax(wave({4, 5}, 0.53, 0.2) * 2.0, 1);
  expect_near_rel(cross_entropy(logits, probs, cw, Reduction::Mean, -100, 0.1).item<double>(), kCeProbs, tol);
  // float32
  expect_near_rel(cross_entropy(logits.astype(Float32), tgt, cw.astype(Float32), Reduction::Mean, 2, 0.2).item<double>(),
                  kCeSmoothWeightIgnore, 1e-5);
  // unbatched (C,) with a 0-d target
  Tensor one = cross_entropy(logits[0], scalar_tensor(1, Int64), Tensor(), Reduction::None);
  EXPECT_EQ(one.ndim(), 0);
  expect_near_rel(one.item<double>(), kCeNone[0], tol);
  // every target ignored: mean is NaN, as PyTorch
  EXPECT_TRUE(std::isnan(cross_entropy(logits, full({4}, 7, Int64), Tensor(), Reduction::Mean, 7).item<double>()));
}

// float32 (N, C) logits without class weights or label smoothing take the fused kernel
// (one read of the logits forward, one backward); class weights of 1 take the composite
// (log_softmax, pick, log_softmax's backward), which multiplies by exactly 1: the losses and
// gradients must agree bit for bit, at every reduction, with ignored targets, odd class
// counts (vector tails), a non-contiguous input and 1 or 2 threads.
TEST(NNForward, FusedCrossEntropyIsTheCompositeBitForBit) {
  const int saved = get_num_threads();
  Generator gen(11);
  for (const auto& [n, c] : std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {37, 1003}, {130, 10}, {3, 17}}) {
    Tensor base = randn({n, c}, Float32, default_device(), &gen) * 4.0;
    Tensor tgt = randint(0, c, {n}, Int64, default_device(), &gen);
    tgt = where(mod(arange(n, Int64), scalar_tensor(3, Int64)) == 1, scalar_tensor(-100, Int64), tgt);  // every third row ignored
    Tensor seed = randn({n}, Float32, default_device(), &gen);
    for (bool strided : {false, true}) {
      // the same values, contiguous or as the transpose of a (C, N) tensor
      Tensor source = strided ? base.transpose().copy() : base;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
          Tensor xf = (strided ? source.transpose() : source).detach().requires_grad_();
          Tensor xc = (strided ? source.transpose() : source).detach().requires_grad_();
          EXPECT_EQ(xf.is_contiguous(), !strided);
          Tensor lf = cross_entropy(xf, tgt, Tensor(), r, -100);
          Tensor lc = cross_entropy(xc, tgt, ones({c}, Float32), r, -100);
          const std::string what = std::to_string(n) + "x" + std::to_string(c) + (strided ? " strided" : "") + ", " +
                                   std::to_string(threads) + " threads, reduction " + std::to_string(int(r));
          EXPECT_TRUE(array_equal(lf, lc)) << what;
          if (r == Reduction::None) {  // the fused op is the per-row loss itself; the composite ends in a negation
            EXPECT_STREQ(lf.impl()->grad_fn->name(), "cross_entropy");
            EXPECT_STRNE(lc.impl()->grad_fn->name(), "cross_entropy");
            lf.backward(seed);
            lc.backward(seed);
          } else {
            lf.backward();
            lc.backward();
          }
          EXPECT_TRUE(array_equal(xf.grad(), xc.grad())) << what;
          EXPECT_TRUE(array_equal(xf.grad()[1], zeros({c}, Float32))) << what;  // an ignored row
        }
      }
    }
  }
  set_num_threads(saved);
  // against the float64 composite (PyTorch's definition, checked above against its values)
  Tensor x64 = randn({50, 300}, Float64, default_device(), &gen) * 3.0;
  Tensor t = randint(0, 300, {50}, Int64, default_device(), &gen);
  Tensor x32 = x64.astype(Float32).requires_grad_();
  Tensor x64g = x64.detach().requires_grad_();
  cross_entropy(x32, t).backward();
  Tensor want = cross_entropy(x64g, t);
  want.backward();
  expect_near_rel(cross_entropy(x32.detach(), t).item<double>(), want.item<double>(), 1e-6);
  EXPECT_TRUE(allclose(x32.grad().astype(Float64), x64g.grad(), 1e-5, 1e-8));
}

// float32 gelu with the tanh approximation takes the fused kernel: its output must be the
// composite's (the nine elementwise ops, written out here) bit for bit, at odd sizes (vector
// tails, blocks, a size the pool splits), on a non-contiguous input and at 1 or 2 threads; one
// recorded node; its gradient that of the float64 composite.
TEST(NNForward, FusedGeluTanhIsTheComposite) {
  const int saved = get_num_threads();
  Generator gen(12);
  const double c = std::sqrt(2.0 / M_PI);
  auto composite = [c](const Tensor& x) { return x * 0.5 * (1.0 + tanh((x + x * x * x * 0.044715) * c)); };
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1025}, int64_t{70001}}) {
    Tensor base = randn({n, 3}, Float32, default_device(), &gen) * 3.0;
    Tensor seed = randn({n, 3}, Float32, default_device(), &gen);
    for (bool strided : {false, true}) {
      Tensor source = strided ? base.transpose().copy() : base;
      Tensor first;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const std::string what = std::to_string(n) + (strided ? " strided, " : ", ") + std::to_string(threads) + " threads";
        Tensor x = (strided ? source.transpose() : source).detach().requires_grad_();
        if (n > 1) EXPECT_EQ(x.is_contiguous(), !strided);
        Tensor y = gelu(x, true);
        EXPECT_TRUE(array_equal(y, composite(x.detach()))) << what;
        ASSERT_NE(y.impl()->grad_fn, nullptr);
        EXPECT_STREQ(y.impl()->grad_fn->name(), "gelu");
        y.backward(seed);
        // against float64; 1 - t^2 cancels where tanh nears 1, so float32's composite is off by
        // as much: the fused gradient may not be further off than it
        Tensor x64 = x.detach().astype(Float64).requires_grad_();
        composite(x64).backward(seed.astype(Float64));
        Tensor x32 = x.detach().requires_grad_();
        composite(x32).backward(seed);
        const double err = max(abs(x.grad().astype(Float64) - x64.grad())).item<double>();
        const double err_composite = max(abs(x32.grad().astype(Float64) - x64.grad())).item<double>();
        EXPECT_LE(err, 2 * err_composite + 1e-6) << what << ": " << err << " against the composite's " << err_composite;
        EXPECT_TRUE(allclose(x.grad().astype(Float64), x64.grad(), 1e-4, 1e-5)) << what;
        if (threads == 1) first = x.grad();
        else EXPECT_TRUE(array_equal(x.grad(), first)) << what;  // elementwise: the same bits at any thread count
      }
    }
  }
  set_num_threads(saved);
  // saturated tails: the gradient goes to 0 below and to 1 above, without NaN
  Tensor x = from_vector<float>({-30.0f, -10.0f, 0.0f, 10.0f, 30.0f}, {5}).requires_grad_();
  gelu(x, true).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), from_vector<float>({0.0f, 0.0f, 0.5f, 1.0f, 1.0f}, {5}), 1e-6, 1e-6));
}

TEST(NNForward, NllLossMatchesTorch) {
  Tensor lp = log_softmax(wave({4, 5}, 0.37, 0.1) * 3.0, 1);
  Tensor tgt = from_vector<int64_t>({1, 2, 4, 0}, {4});
  Tensor cw = square(wave({5}, 0.91, 0.3)) + 0.5;
  expect_near_rel(nll_loss(lp, tgt, cw).item<double>(), kNllWeight, 1e-12);
  expect_values(nll_loss(lp, tgt, cw, Reduction::None, 4), kNllNone, 1e-12);
}

TEST(NNForward, BceWithLogitsMatchesTorchAndIsStable) {
  Tensor x = wave({3, 4}, 0.37, 0.1) * 4.0;
  Tensor y = astype(wave({3, 4}, 0.53, 0.2) > 0.0, Float64) * 0.8 + 0.1;
  Tensor pw = wave({4}, 0.91, 0.3) + 1.5;
  Tensor bw = wave({3, 4}, 0.2, 0.4) * 0.5 + 1.0;
  expect_near_rel(binary_cross_entropy_with_logits(x, y).item<double>(), kBceMean, 1e-12);
  expect_values(binary_cross_entropy_with_logits(x, y, bw, pw, Reduction::None), kBcePosWeightNone, 1e-12);
  // large logits stay finite
  Tensor big = binary_cross_entropy_with_logits(tensor<double>({-300, 300, 40}), tensor<double>({1, 0, 1}), Tensor(),
                                                Tensor(), Reduction::Sum);
  EXPECT_TRUE(std::isfinite(big.item<double>()));
  expect_near_rel(big.item<double>(), kBceLarge, 1e-12);
  Tensor big32 = binary_cross_entropy_with_logits(tensor<float>({-300, 300, 40}), tensor<float>({1, 0, 1}), Tensor(),
                                                  Tensor(), Reduction::Sum);
  expect_near_rel(big32.item<double>(), kBceLarge, 1e-6);
}

TEST(NNForward, AttentionMatchesTorch) {
  Tensor q = wave({2, 3, 4}, 0.37, 0.1), k = wave({2, 5, 4}, 0.53, 0.2), v = wave({2, 5, 2}, 0.91, 0.3);
  Tensor y = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_values(y, kSdpa, 1e-12);
  Tensor bmask = wave({3, 5}, 0.7, 0.5) > -0.3;
  expect_near_rel(proj(scaled_dot_product_attention(q, k, v, bmask)), kSdpaBoolProj, 1e-12);
  expect_near_rel(proj(scaled_dot_product_attention(q, k, v, wave({2, 1, 5}, 0.3, 0.0), false, 0.3)), kSdpaFloatProj,
                  1e-12);
  expect_near_rel(proj(scaled_dot_product_attention(q, k, v, Tensor(), true)), kSdpaCausalProj, 1e-12);
  expect_near_rel(proj(scaled_dot_product_attention(q.astype(Float32), k.astype(Float32), v.astype(Float32))),
                  proj(y), 1e-5);
}

TEST(NNForward, DropoutIsSeededInvertedAndOffInEval) {
  Tensor x = ones({200, 50}, Float32);
  Generator g1(42), g2(42), g3(7);
  Tensor a = dropout(x, 0.3, true, &g1), b = dropout(x, 0.3, true, &g2), c = dropout(x, 0.3, true, &g3);
  EXPECT_TRUE(array_equal(a, b));
  EXPECT_FALSE(array_equal(a, c));
  // kept values are scaled by 1 / (1 - p); about p of them are dropped
  const double scale = 1.0 / 0.7;
  Tensor kept = a > 0.0;
  EXPECT_TRUE(allclose(where(kept, a, scale), full({200, 50}, scale, Float32), 1e-6, 1e-6));
  const double frac_dropped = 1.0 - mean(astype(kept, Float64)).item<double>();
  EXPECT_NEAR(frac_dropped, 0.3, 0.02);
  EXPECT_NEAR(mean(a.astype(Float64)).item<double>(), 1.0, 0.03);
  // eval and p = 0: identity; p = 1: zeros
  EXPECT_TRUE(array_equal(dropout(x, 0.3, false), x));
  EXPECT_TRUE(array_equal(dropout(x, 0.0, true), x));
  EXPECT_TRUE(array_equal(dropout(x, 1.0, true), zeros({200, 50}, Float32)));
  // gradient goes through the same mask
  Tensor xl = x.copy();
  xl.requires_grad_(true);
  Generator g4(42);
  Tensor d = dropout(xl, 0.3, true, &g4);
  d.backward(ones_like(d));
  EXPECT_TRUE(array_equal(xl.grad(), a));
}

// ------------------------------------------------------------------ float64 gradient checks
TEST(NNGrad, Conv2d) {
  gradcheck([](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], 1, 1); },
            {wave({2, 2, 4, 4}, 0.37, 0.1), wave({3, 2, 3, 3}, 0.53, 0.2), wave({3}, 0.91, 0.3)});
  gradcheck([](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], {2, 1}, {1, 0, 2, 1}, {1, 2}, 2); },
            {wave({1, 4, 6, 5}, 0.37, 0.1), wave({4, 2, 3, 2}, 0.53, 0.2), wave({4}, 0.91, 0.3)});
  gradcheck([](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], Tensor(), 1, "same", {2, 1}); },
            {wave({1, 2, 5, 5}, 0.37, 0.1), wave({2, 2, 2, 3}, 0.53, 0.2)});
}

TEST(NNGrad, Conv1d) {
  gradcheck([](const std::vector<Tensor>& t) { return conv1d(t[0], t[1], t[2], 2, 1, 2); },
            {wave({2, 3, 9}, 0.37, 0.1), wave({4, 3, 3}, 0.53, 0.2), wave({4}, 0.91, 0.3)});
}

TEST(NNGrad, Conv2dTranspose) {
  gradcheck([](const std::vector<Tensor>& t) { return conv2d_transpose(t[0], t[1], t[2], 2, 1, 1, 2); },
            {wave({1, 4, 3, 3}, 0.37, 0.1), wave({4, 2, 3, 3}, 0.53, 0.2), wave({4}, 0.91, 0.3)});
  gradcheck([](const std::vector<Tensor>& t) { return conv2d_transpose(t[0], t[1], Tensor(), {1, 2}, {0, 1}, 0, 1, {2, 1}); },
            {wave({2, 2, 3, 3}, 0.37, 0.1), wave({2, 3, 2, 3}, 0.53, 0.2)});
}

TEST(NNGrad, Pools) {
  gradcheck([](const std::vector<Tensor>& t) { return max_pool2d(t[0], 3, 2, 1); }, {wave({2, 2, 5, 5}, 0.37, 0.1)});
  gradcheck([](const std::vector<Tensor>& t) { return max_pool2d(t[0], {2, 3}, 2, 1, {2, 1}, true); },
            {wave({1, 1, 6, 7}, 0.37, 0.1)});
  gradcheck([](const std::vector<Tensor>& t) { return avg_pool2d(t[0], 3, 2, 1); }, {wave({2, 2, 5, 5}, 0.37, 0.1)});
  gradcheck([](const std::vector<Tensor>& t) { return avg_pool2d(t[0], {3, 2}, 2, 1, true, false); },
            {wave({1, 2, 5, 5}, 0.37, 0.1)});
  gradcheck([](const std::vector<Tensor>& t) { return global_avg_pool2d(t[0]); }, {wave({2, 2, 3, 3}, 0.37, 0.1)});
  gradcheck([](const std::vector<Tensor>& t) { return global_max_pool2d(t[0]); }, {wave({2, 2, 3, 3}, 0.37, 0.1)});
}

TEST(NNGrad, Normalization) {
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, 1e-5);
      },
      {wave({3, 2, 2, 2}, 0.37, 0.1) * 2.0, wave({2}, 0.91, 0.3), wave({2}, 0.2, 0.4)});
  gradcheck(
      [](const std::vector<Tensor>& t) {
        Tensor rm = wave({2}, 0.3, 0.0), rv = square(wave({2}, 0.5, 0.2)) + 1.0;
        return batch_norm(t[0], rm, rv, t[1], t[2], false);
      },
      {wave({3, 2, 4}, 0.37, 0.1), wave({2}, 0.91, 0.3), wave({2}, 0.2, 0.4)});
  gradcheck([](const std::vector<Tensor>& t) { return layer_norm(t[0], {3, 2}, t[1], t[2]); },
            {wave({2, 3, 2}, 0.37, 0.1) * 2.0, wave({3, 2}, 0.91, 0.3), wave({3, 2}, 0.2, 0.4)});
}

TEST(NNGrad, DropoutAndEmbedding) {
  gradcheck(
      [](const std::vector<Tensor>& t) {
        Generator g(3);  // the same mask on every call
        return dropout(t[0], 0.4, true, &g);
      },
      {wave({4, 5}, 0.37, 0.1)});
  Tensor ids = from_vector<int64_t>({0, 2, 0, 4, 2, 1}, {2, 3});
  // without padding_idx (with it, row 2 deliberately gets no gradient although the output depends
  // on it; EmbeddingGradientAccumulatesAndSkipsPadding checks that against PyTorch)
  gradcheck([ids](const std::vector<Tensor>& t) { return embedding(t[0], ids); }, {wave({5, 3}, 0.37, 0.1)});
}

TEST(NNGrad, Losses) {
  Tensor tgt = from_vector<int64_t>({1, 2, 4, 0}, {4});
  Tensor cw = square(wave({5}, 0.91, 0.3)) + 0.5;
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    gradcheck([&](const std::vector<Tensor>& t) { return cross_entropy(t[0], tgt, cw, r, 2, 0.2); },
              {wave({4, 5}, 0.37, 0.1) * 3.0});
    gradcheck([&](const std::vector<Tensor>& t) { return nll_loss(t[0], tgt, cw, r, 4); }, {wave({4, 5}, 0.37, 0.1)});
  }
  gradcheck([&](const std::vector<Tensor>& t) { return cross_entropy(t[0], softmax(t[1], 1), Tensor(), Reduction::Mean, -100, 0.1); },
            {wave({4, 5}, 0.37, 0.1), wave({4, 5}, 0.53, 0.2)});
  Tensor tgt3 = from_vector<int64_t>({0, 3, 1, 2, 2, 3}, {2, 3});
  gradcheck([&](const std::vector<Tensor>& t) { return cross_entropy(t[0], tgt3, Tensor(), Reduction::Mean, 3, 0.1); },
            {wave({2, 4, 3}, 0.37, 0.1)});
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return binary_cross_entropy_with_logits(t[0], t[1], t[2], t[3], Reduction::Mean);
      },
      {wave({3, 4}, 0.37, 0.1) * 4.0, wave({3, 4}, 0.53, 0.2) * 0.4 + 0.5, wave({3, 4}, 0.2, 0.4) * 0.5 + 1.0,
       wave({4}, 0.91, 0.3) + 1.5});
}

TEST(NNGrad, LossesWithEveryTargetIgnoredHaveZeroGradient) {
  // the mean is NaN (0 / 0, as PyTorch) but no gradient flows: PyTorch's backward writes only
  // the non-ignored positions (found by the random differential tester, docs/testing.md)
  const Tensor x = wave({3, 4}, 0.37, 0.1);
  const Tensor tgt = full({3}, 2, Int64);
  for (double smoothing : {0.0, 0.2}) {
    Tensor xl = x.detach();
    xl.requires_grad_(true);
    const Tensor loss = cross_entropy(xl, tgt, Tensor(), Reduction::Mean, 2, smoothing);
    EXPECT_TRUE(std::isnan(loss.item<double>()));
    EXPECT_TRUE(array_equal(grad(loss, {xl})[0], zeros({3, 4}, x.dtype()))) << "smoothing " << smoothing;
  }
  Tensor lp = x.detach();
  lp.requires_grad_(true);
  const Tensor nll = nll_loss(lp, tgt, square(wave({4}, 0.91, 0.3)) + 0.5, Reduction::Mean, 2);
  EXPECT_TRUE(std::isnan(nll.item<double>()));
  EXPECT_TRUE(array_equal(grad(nll, {lp})[0], zeros({3, 4}, x.dtype())));
}

TEST(NNGrad, BceWithLogitsGradientAtZero) {
  // d/dx = sigmoid(x) - y exactly, also at the kink-free point x = 0 (no subgradient of |x|)
  Tensor x = zeros({3}, Float64);
  x.requires_grad_(true);
  Tensor y = tensor<double>({0.0, 0.25, 1.0});
  binary_cross_entropy_with_logits(x, y, Tensor(), Tensor(), Reduction::Sum).backward();
  expect_values(x.grad(), {0.5, 0.25, -0.5}, 1e-15);
}

TEST(NNGrad, Attention) {
  gradcheck([](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2]); },
            {wave({2, 3, 4}, 0.37, 0.1), wave({2, 5, 4}, 0.53, 0.2), wave({2, 5, 2}, 0.91, 0.3)});
  gradcheck([](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), true); },
            {wave({1, 4, 3}, 0.37, 0.1), wave({1, 4, 3}, 0.53, 0.2), wave({1, 4, 2}, 0.91, 0.3)});
  gradcheck(
      [](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2], t[3], false, 0.5); },
      {wave({2, 3, 4}, 0.37, 0.1), wave({2, 5, 4}, 0.53, 0.2), wave({2, 5, 2}, 0.91, 0.3), wave({3, 5}, 0.3, 0.0)});
}

// ------------------------------------------------------------------ oneDNN float32 vs the float64 kernels
TEST(NNConvKernels, OneDnnFloat32AgreesWithReferenceFloat64) {
  struct Case {
    Shape x, w;
    IntList stride;
    ConvPadding padding;
    IntList dilation;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{4, 16, 14, 14}, {32, 16, 3, 3}, 1, 1, 1, 1},
      {{2, 8, 15, 13}, {12, 4, 3, 5}, {2, 1}, {1, 2}, {2, 1}, 2},
      {{3, 6, 9, 9}, {6, 1, 3, 3}, 2, {0, 1, 1, 2}, 1, 6},  // depthwise, asymmetric padding
      {{2, 3, 28, 28}, {8, 3, 5, 5}, 1, "same", 1, 1},
      {{2, 16, 7, 7}, {8, 16, 1, 1}, 1, 0, 1, 1},
  };
  for (const Case& c : cases) {
    Tensor x = wave(c.x, 0.37, 0.1), w = wave(c.w, 0.53, 0.2), b = wave({c.w[0]}, 0.91, 0.3);
    std::vector<Tensor> g64, g32;
    Tensor y64, y32;
    for (DType dt : {Float64, Float32}) {
      Tensor xl = x.astype(dt).detach(), wl = w.astype(dt).detach(), bl = b.astype(dt).detach();
      for (Tensor* t : {&xl, &wl, &bl}) t->requires_grad_(true);
      Tensor y = conv2d(xl, wl, bl, c.stride, c.padding, c.dilation, c.groups);
      std::vector<Tensor> gs = grad(sum(y * wave(y.shape(), 0.61, 0.3, dt)), {xl, wl, bl});
      (dt == Float64 ? y64 : y32) = y.detach();
      (dt == Float64 ? g64 : g32) = gs;
    }
    EXPECT_LT(rel_err(y32, y64), 1e-5) << shape_str(c.x) << " " << shape_str(c.w);
    for (int i = 0; i < 3; ++i) EXPECT_LT(rel_err(g32[i], g64[i]), 1e-5) << "grad " << i << " " << shape_str(c.x);
  }
  // transposed
  Tensor x = wave({2, 8, 7, 7}, 0.37, 0.1), w = wave({8, 3, 4, 4}, 0.53, 0.2);
  Tensor a = conv2d_transpose(x, w, Tensor(), 2, 1, 0, 2);
  Tensor b = conv2d_transpose(x.astype(Float32), w.astype(Float32), Tensor(), 2, 1, 0, 2);
  EXPECT_EQ(a.shape(), (Shape{2, 6, 14, 14}));
  EXPECT_LT(rel_err(b, a), 1e-5);
}

TEST(NNConvKernels, ThreadCountChangesDoNotChangeResults) {
  Tensor x = wave({2, 8, 12, 12}, 0.37, 0.1, Float32), w = wave({8, 8, 3, 3}, 0.53, 0.2, Float32);
  const int before = get_num_threads();
  set_num_threads(1);
  Tensor a = conv2d(x, w, Tensor(), 1, 1);
  set_num_threads(2);
  Tensor b = conv2d(x, w, Tensor(), 1, 1);
  set_num_threads(before);
  EXPECT_LT(rel_err(a, b), 1e-6);
}

// ------------------------------------------------------------------ errors
TEST(NNErrors, ConvArguments) {
  Tensor x = zeros({1, 4, 5, 5}), w = zeros({6, 3, 3, 3});
  std::string m = error_message<ShapeError>([&] { conv2d(zeros({2, 3, 4}), w); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "input x", "4-d", "(N, C_in, H, W)", "(2, 3, 4)"}));
  m = error_message<ShapeError>([&] { conv2d(x, w, Tensor(), 1, 0, 1, 2); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "4 input channels", "weight.shape[1] * groups = 3 * 2 = 6", "(1, 4, 5, 5)", "(6, 3, 3, 3)"}));
  m = error_message<ShapeError>([&] { conv2d(zeros({1, 6, 5, 5}), zeros({5, 3, 3, 3}), Tensor(), 1, 0, 1, 2); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "output channels", "not divisible by groups=2"}));
  m = error_message<ValueError>([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), 1, "full"); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "unknown padding 'full'", "'same'", "'valid'"}));
  m = error_message<ValueError>([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), 2, "same"); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "padding='same'", "stride 1", "(2, 2)"}));
  // the padding rule is the one the Conv layers use (loom::conv_padding): values in [0, 2^31]
  m = error_message<ValueError>([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), 1, int64_t{1} << 40); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "padding must be in [0, 2^31]", "1099511627776"}));
  m = error_message<ValueError>([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), 1, ConvPadding({1, 1, 1})); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "padding must have 1, 2 or 4 values", "(1, 1, 1)"}));
  EXPECT_EQ(conv_padding("conv2d", "same", {4, 3}, {1, 2}, {1, 1}), (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 2}}));
  EXPECT_EQ(conv_padding("conv2d", ConvPadding({1, 2, 3, 4}), {3, 3}, {1, 1}, {2, 2}),
            (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {3, 4}}));
  m = error_message<ShapeError>([&] { conv2d(x, zeros({6, 4, 7, 3})); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "kernel", "larger than the padded input", "(1, 4, 5, 5)"}));
  m = error_message<ShapeError>([&] { conv2d(x, zeros({6, 4, 3, 3}), zeros({5})); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "bias", "(6,)", "(5,)"}));
  m = error_message<DTypeError>([&] { conv2d(x, zeros({6, 4, 3, 3}, Float64)); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "float32", "float64", "same dtype"}));
  m = error_message<DTypeError>([&] { conv2d(zeros({1, 4, 5, 5}, Int64), zeros({6, 4, 3, 3}, Int64)); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "int64", "float32"}));
  m = error_message<ValueError>([&] { conv2d(x, zeros({6, 4, 3, 3}), Tensor(), {1, 1, 1}); });
  EXPECT_TRUE(contains_all(m, {"conv2d", "stride", "1 or 2 values", "(1, 1, 1)"}));
  m = error_message<ShapeError>([&] { conv1d(x, zeros({6, 4, 3})); });
  EXPECT_TRUE(contains_all(m, {"conv1d", "3-d", "(N, C_in, L)", "(1, 4, 5, 5)"}));
  m = error_message<ValueError>([&] { conv2d_transpose(x, zeros({4, 2, 3, 3}), Tensor(), 2, 1, 2); });
  EXPECT_TRUE(contains_all(m, {"conv2d_transpose", "output_padding", "(2, 2)", "stride"}));
  m = error_message<ShapeError>([&] { conv2d_transpose(x, zeros({3, 2, 3, 3})); });
  EXPECT_TRUE(contains_all(m, {"conv2d_transpose", "4 input channels", "weight.shape[0]", "(3, 2, 3, 3)"}));
}

TEST(NNErrors, PoolNormLossAttentionArguments) {
  std::string m = error_message<ValueError>([] { max_pool2d(zeros({1, 1, 5, 5}), 2, 1, 2); });
  EXPECT_TRUE(contains_all(m, {"max_pool2d", "padding", "half of kernel_size"}));
  m = error_message<ShapeError>([] { avg_pool2d(zeros({5, 5}), 2); });
  EXPECT_TRUE(contains_all(m, {"avg_pool2d", "(N, C, H, W)", "(5, 5)"}));
  m = error_message<ShapeError>([] { max_pool2d(zeros({1, 1, 2, 2}), 3); });
  EXPECT_TRUE(contains_all(m, {"max_pool2d", "empty", "(1, 1, 2, 2)"}));
  m = error_message<ShapeError>([] { batch_norm(zeros({4, 3, 2}), zeros({4}), ones({4}), Tensor(), Tensor(), false); });
  EXPECT_TRUE(contains_all(m, {"batch_norm", "running_mean", "(3,)", "(4,)"}));
  m = error_message<ValueError>([] { batch_norm(zeros({1, 3}), zeros({3}), ones({3}), Tensor(), Tensor(), true); });
  EXPECT_TRUE(contains_all(m, {"batch_norm", "more than 1 value per channel", "(1, 3)"}));
  m = error_message<ValueError>([] { batch_norm(zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); });
  EXPECT_TRUE(contains_all(m, {"batch_norm", "running_mean"}));
  m = error_message<ShapeError>([] { layer_norm(zeros({2, 3, 4}), {3}); });
  EXPECT_TRUE(contains_all(m, {"layer_norm", "normalized_shape", "(3,)", "(2, 3, 4)"}));
  m = error_message<IndexError>([] { embedding(zeros({5, 2}), tensor<int64_t>({1, 5})); });
  EXPECT_TRUE(contains_all(m, {"embedding", "id 5", "(5, 2)", "0 to 4"}));
  m = error_message<DTypeError>([] { embedding(zeros({5, 2}), tensor<float>({1, 2})); });
  EXPECT_TRUE(contains_all(m, {"embedding", "integers", "float32"}));
  m = error_message<IndexError>([] { cross_entropy(zeros({2, 3}), tensor<int64_t>({0, 3})); });
  EXPECT_TRUE(contains_all(m, {"cross_entropy", "target 3", "3 classes", "ignore_index=-100"}));
  m = error_message<ShapeError>([] { cross_entropy(zeros({2, 3}), tensor<int64_t>({0, 1, 2})); });
  EXPECT_TRUE(contains_all(m, {"cross_entropy", "(3,)", "(2, 3)", "expected target shape (2,)"}));
  m = error_message<ShapeError>([] { nll_loss(zeros({2, 3}), tensor<int64_t>({0, 1}), ones({4})); });
  EXPECT_TRUE(contains_all(m, {"nll_loss", "weight", "(3,)", "(4,)"}));
  m = error_message<ShapeError>([] { binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3, 2})); });
  EXPECT_TRUE(contains_all(m, {"binary_cross_entropy_with_logits", "(3, 2)", "(2, 3)"}));
  m = error_message<ShapeError>([] { scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 5, 3}), zeros({2, 5, 2})); });
  EXPECT_TRUE(contains_all(m, {"scaled_dot_product_attention", "embedding size", "(2, 3, 4)", "(2, 5, 3)"}));
  m = error_message<ValueError>(
      [] { scaled_dot_product_attention(zeros({3, 4}), zeros({3, 4}), zeros({3, 4}), ones({3, 3}, Bool), true); });
  EXPECT_TRUE(contains_all(m, {"scaled_dot_product_attention", "is_causal"}));
  m = error_message<ValueError>([] { dropout(zeros({3}), 1.5); });
  EXPECT_TRUE(contains_all(m, {"dropout", "[0, 1]"}));
}

TEST(NNRegistry, NewOpsAreRegisteredAsNN) {
  for (const char* name : {"conv1d", "conv2d", "conv2d_transpose", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
                           "global_max_pool2d", "batch_norm", "layer_norm", "dropout", "embedding", "cross_entropy",
                           "nll_loss", "binary_cross_entropy_with_logits", "scaled_dot_product_attention"}) {
    const OpInfo* op = find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_EQ(op->category, "nn") << name;
    EXPECT_TRUE(op->differentiable) << name;
  }
}

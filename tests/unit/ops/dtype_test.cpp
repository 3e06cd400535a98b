// Dtype promotion (NumPy's table), the weak-scalar rule, result dtypes of ops, and the 16-bit
// float conversions.
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/half.h>
#include <loom/core/index.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "unit/common/core_test_util.h"

using namespace loom;

namespace {

const std::vector<DType> kNumpyTypes = {Bool, UInt8, Int32, Int64, Float16, Float32, Float64};

// numpy.promote_types(row, col) for bool, uint8, int32, int64, float16, float32, float64,
// produced by numpy 1.24 (identical in numpy 2):
//   for a in ts: print([str(np.promote_types(a, b)) for b in ts])
const DType kNumpyTable[7][7] = {
    {Bool, UInt8, Int32, Int64, Float16, Float32, Float64},
    {UInt8, UInt8, Int32, Int64, Float16, Float32, Float64},
    {Int32, Int32, Int32, Int64, Float64, Float64, Float64},
    {Int64, Int64, Int64, Int64, Float64, Float64, Float64},
    {Float16, Float16, Float64, Float64, Float16, Float32, Float64},
    {Float32, Float32, Float64, Float64, Float32, Float32, Float64},
    {Float64, Float64, Float64, Float64, Float64, Float64, Float64},
};

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
half half_from_bits(uint16_t b) {
  half h;
  h.bits = b;
  return h;
}
bfloat16 bf16_from_bits(uint16_t b) {
  bfloat16 h;
  h.bits = b;
  return h;
}

}  // namespace

TEST(DType, ItemsizeAndNames) {
  const std::map<DType, std::pair<size_t, std::string>> expected = {
      {Bool, {1, "bool"}},        {UInt8, {1, "uint8"}},      {Int32, {4, "int32"}},
      {Int64, {8, "int64"}},      {Float16, {2, "float16"}},  {BFloat16, {2, "bfloat16"}},
      {Float32, {4, "float32"}},  {Float64, {8, "float64"}}};
  for (const auto& [d, e] : expected) {
    EXPECT_EQ(itemsize(d), e.first) << e.second;
    EXPECT_EQ(std::string(dtype_name(d)), e.second);
  }
  EXPECT_TRUE(is_floating(BFloat16));
  EXPECT_FALSE(is_floating(Int64));
  EXPECT_FALSE(is_integral(Bool));
  EXPECT_TRUE(is_integral(UInt8));
}

TEST(DType, PromotionMatchesNumpyTable) {
  for (size_t i = 0; i < kNumpyTypes.size(); ++i)
    for (size_t j = 0; j < kNumpyTypes.size(); ++j)
      EXPECT_EQ(promote_types(kNumpyTypes[i], kNumpyTypes[j]), kNumpyTable[i][j])
          << dtype_name(kNumpyTypes[i]) << " with " << dtype_name(kNumpyTypes[j]) << " gave "
          << dtype_name(promote_types(kNumpyTypes[i], kNumpyTypes[j]));
}

TEST(DType, CanCastIsSafeCasting) {
  // numpy.can_cast(a, b, "safe") is promote_types(a, b) == b
  for (size_t i = 0; i < kNumpyTypes.size(); ++i)
    for (size_t j = 0; j < kNumpyTypes.size(); ++j)
      EXPECT_EQ(can_cast(kNumpyTypes[i], kNumpyTypes[j]), kNumpyTable[i][j] == kNumpyTypes[j]);
  EXPECT_TRUE(can_cast(Int32, Float64));
  EXPECT_FALSE(can_cast(Int32, Float32));
  EXPECT_FALSE(can_cast(Float64, Float32));
}

TEST(DType, BFloat16Rules) {
  // bfloat16 sits beside float16 (src/core/dtype.cpp): bool/uint8 keep it, wider ints need
  // float64, float16 with bfloat16 meets at float32, wider floats win.
  const std::map<DType, DType> expected = {{Bool, BFloat16},    {UInt8, BFloat16},   {Int32, Float64},
                                           {Int64, Float64},    {Float16, Float32},  {BFloat16, BFloat16},
                                           {Float32, Float32},  {Float64, Float64}};
  for (const auto& [other, result] : expected) {
    EXPECT_EQ(promote_types(BFloat16, other), result) << dtype_name(other);
    EXPECT_EQ(promote_types(other, BFloat16), result) << dtype_name(other);
  }
  EXPECT_FALSE(can_cast(BFloat16, Float16));
  EXPECT_FALSE(can_cast(Float16, BFloat16));
  EXPECT_TRUE(can_cast(BFloat16, Float32));
}

TEST(DType, TensorOpsFollowPromotion) {
  for (size_t i = 0; i < kNumpyTypes.size(); ++i)
    for (size_t j = 0; j < kNumpyTypes.size(); ++j) {
      if (kNumpyTypes[i] == Bool && kNumpyTypes[j] == Bool) continue;
      Tensor a = ones({2}, kNumpyTypes[i]), b = ones({2}, kNumpyTypes[j]);
      Tensor y = add(a, b);
      EXPECT_EQ(y.dtype(), kNumpyTable[i][j]);
      EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{2, 2}));
      EXPECT_EQ(less(a, b).dtype(), Bool);
    }
  EXPECT_EQ(add(ones({1}, BFloat16), ones({1}, Float16)).dtype(), Float32);
  EXPECT_EQ(add(ones({1}, Bool), ones({1}, Bool)).dtype(), Bool);
}

TEST(DType, WeakScalarRule) {
  EXPECT_EQ(Scalar(1).result_dtype_with(UInt8), UInt8);
  EXPECT_EQ(Scalar(int64_t(7)).result_dtype_with(Int32), Int32);
  EXPECT_EQ(Scalar(1).result_dtype_with(Float16), Float16);
  EXPECT_EQ(Scalar(1).result_dtype_with(Bool), Int64);
  EXPECT_EQ(Scalar(1.5).result_dtype_with(Int32), Float32);
  EXPECT_EQ(Scalar(1.5f).result_dtype_with(Bool), Float32);
  EXPECT_EQ(Scalar(1.5).result_dtype_with(Float16), Float16);
  EXPECT_EQ(Scalar(1.5).result_dtype_with(BFloat16), BFloat16);
  EXPECT_EQ(Scalar(1.5).result_dtype_with(Float64), Float64);
  EXPECT_EQ(Scalar(true).result_dtype_with(Int32), Int32);
  EXPECT_EQ(Scalar(true).result_dtype_with(Bool), Bool);
  EXPECT_EQ(Scalar(true).natural_dtype(), Bool);
  EXPECT_EQ(Scalar(3).natural_dtype(), Int64);
  EXPECT_EQ(Scalar(3.0).natural_dtype(), Float32);
  EXPECT_EQ(scalar_tensor(3.0).dtype(), Float32);
  EXPECT_EQ(scalar_tensor(3).dtype(), Int64);

  // the operators apply it: the tensor's dtype wins unless the scalar's kind is higher
  EXPECT_EQ((ones({2}, UInt8) + 1).dtype(), UInt8);
  EXPECT_EQ((ones({2}, Int32) * 2).dtype(), Int32);
  EXPECT_EQ((ones({2}, Int32) * 2.5).dtype(), Float32);
  EXPECT_EQ((ones({2}, Float16) + 1.0).dtype(), Float16);
  EXPECT_EQ((ones({2}, BFloat16) * 3).dtype(), BFloat16);
  EXPECT_EQ((ones({2}, Bool) + 1).dtype(), Int64);
  EXPECT_EQ((2 - ones({2}, Int32)).dtype(), Int32);
  EXPECT_EQ((ones({2}, Int32) * 2.5).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ((ones({2}, UInt8) + 1).to_vector<int>(), (std::vector<int>{2, 2}));
}

TEST(DType, ResultDtypesOfOps) {
  // integer true division gives float64 (NumPy)
  Tensor i = tensor<int32_t>({1, 2, 3});
  Tensor q = divide(i, tensor<int32_t>({2, 2, 2}));
  EXPECT_EQ(q.dtype(), Float64);
  EXPECT_EQ(q.to_vector<double>(), (std::vector<double>{0.5, 1.0, 1.5}));
  EXPECT_EQ((i / 2).dtype(), Float64);
  EXPECT_EQ(divide(ones({1}, Bool), ones({1}, Bool)).dtype(), Float64);
  EXPECT_EQ(divide(ones({1}, Float16), ones({1}, Float16)).dtype(), Float16);
  // float math on integer input computes in float32 (a documented deviation from NumPy)
  EXPECT_EQ(exp(i).dtype(), Float32);
  EXPECT_EQ(sqrt(ones({1}, Int64)).dtype(), Float32);
  EXPECT_EQ(sin(ones({1}, Bool)).dtype(), Float32);
  EXPECT_EQ(exp(ones({1}, Float16)).dtype(), Float16);
  EXPECT_EQ(exp(ones({1}, Float64)).dtype(), Float64);
  // integer sums, products and running sums accumulate in int64
  EXPECT_EQ(sum(i).dtype(), Int64);
  EXPECT_EQ(sum(i).item<int64_t>(), 6);
  EXPECT_EQ(sum(ones({300}, UInt8)).item<int64_t>(), 300);  // no uint8 overflow
  EXPECT_EQ(sum(ones({3}, Bool)).dtype(), Int64);
  EXPECT_EQ(prod(i).dtype(), Int64);
  EXPECT_EQ(prod(i).item<int64_t>(), 6);
  EXPECT_EQ(cumsum(i, 0).dtype(), Int64);
  EXPECT_EQ(cumsum(i, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(cumsum(ones({3}, Bool), 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(sum(ones({2}, Float16)).dtype(), Float16);
  EXPECT_EQ(mean(i).dtype(), Float64);
  EXPECT_EQ(max(i).dtype(), Int32);
  EXPECT_EQ(argmax(i).dtype(), Int64);
  EXPECT_EQ(all(i).dtype(), Bool);
}

TEST(DType, HalfComputesInFloat32AndStoresHalf) {
  // 2048 + 1 = 2049 is not a float16; it rounds to even (2048); 2048 + 3 -> 2052
  Tensor a = full({2}, 2048.0, Float16);
  Tensor y = a + from_vector<float>({1.0f, 3.0f}, {2}).astype(Float16);
  EXPECT_EQ(y.dtype(), Float16);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2048.0f, 2052.0f}));
  // the sum of many float16 values is accumulated in float32: 4096 ones give 4096, which a
  // float16 accumulator would stop at 2048
  EXPECT_EQ(sum(ones({4096}, Float16)).item<float>(), 4096.0f);
  EXPECT_EQ(sum(ones({4096}, BFloat16)).item<float>(), 4096.0f);
}

TEST(DType, AstypeConversions) {
  Tensor f = tensor<float>({-1.7f, 2.9f, 0.0f, 0.5f});
  EXPECT_EQ(f.astype(Int32).to_vector<int>(), (std::vector<int>{-1, 2, 0, 0}));  // truncation
  EXPECT_EQ(f.astype(Bool).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(tensor<int64_t>({0, 2}).astype(Float32).to_vector<float>(), (std::vector<float>{0, 2}));
  EXPECT_EQ(tensor<float>({1.0f + 1.0f / 2048}).astype(Float16).to_vector<float>(), (std::vector<float>{1.0f}));
  EXPECT_EQ(tensor<float>({65520.0f}).astype(Float16).item<float>(), std::numeric_limits<float>::infinity());
  Tensor same = f.astype(Float32);
  EXPECT_EQ(same.impl(), f.impl());  // no copy when the dtype matches
}

// tensor({...}) takes the C++ type's dtype; with a dtype argument it converts, as torch.tensor(dtype=).
TEST(DType, TensorFactoryWithADType) {
  EXPECT_EQ(tensor({1, 2}).dtype(), Int32);
  EXPECT_EQ(tensor({1.5}).dtype(), Float64);
  const Tensor f = tensor({1, 2}, Float32);
  EXPECT_EQ(f.dtype(), Float32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1, 2}));
  const Tensor h = tensor({0.1, 65520.0}, Float16, Device::cpu());
  EXPECT_EQ(h.dtype(), Float16);
  EXPECT_EQ(h.to_vector<float>()[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(tensor<int64_t>({3, -1}, Bool).to_vector<bool>(), (std::vector<bool>{true, true}));
}

TEST(Half, KnownConversionsMatchNumpy) {
  // (float, float16 bits) from numpy: np.float32(v).astype(np.float16).view(np.uint16)
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},                    // largest finite
      {65519.0f, 0x7bff},                    // just below the rounding midpoint to inf
      {65520.0f, 0x7c00},                    // midpoint rounds to even: inf
      {1e6f, 0x7c00},                        // overflow
      {std::ldexp(1.0f, -24), 0x0001},       // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},       // half of it: tie to even (0)
      {std::ldexp(3.0f, -25), 0x0002},       // 1.5 units: tie to even (2)
      {std::ldexp(3.0f, -26), 0x0001},       // 0.75 units rounds up
      {std::ldexp(1.0f, -26), 0x0000},       // underflow
      {std::ldexp(1.0f, -14), 0x0400},       // smallest normal
      {std::ldexp(1023.0f, -24), 0x03ff},    // largest subnormal
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},                             // tie -> even
      {1.0f + std::ldexp(3.0f, -11), 0x3c02},                             // tie -> even (up)
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01},     // above the tie
      {0.1f, 0x2e66},
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
  };
  for (const auto& [f, bits] : cases) EXPECT_EQ(half(f).bits, bits) << f;
  EXPECT_EQ(static_cast<float>(half_from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(half_from_bits(0x03ff)), std::ldexp(1023.0f, -24));
  EXPECT_EQ(static_cast<float>(half_from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(half_from_bits(0xfc00)), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(static_cast<float>(half_from_bits(0x8000))));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(static_cast<float>(half(nan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(half(-nan))));
}

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const half h = half_from_bits(static_cast<uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) {
      EXPECT_EQ(b & 0x7c00u, 0x7c00u);
      EXPECT_NE(b & 0x3ffu, 0u);
      EXPECT_TRUE(std::isnan(static_cast<float>(half(f))));
      continue;
    }
    ASSERT_EQ(half(f).bits, b) << std::hex << b;
  }
}

TEST(Half, RoundingIsToNearestEvenAcrossTheRange) {
  // Halfway between two adjacent halves always goes to the one with an even mantissa.
  for (uint32_t b = 0x0000; b < 0x7bff; b += 37) {
    const float lo = half_from_bits(static_cast<uint16_t>(b));
    const float hi = half_from_bits(static_cast<uint16_t>(b + 1));
    const float mid = (lo + hi) / 2;  // exact in float32
    const uint16_t even = (b & 1u) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    EXPECT_EQ(half(mid).bits, even) << std::hex << b;
    EXPECT_EQ(half(std::nextafter(mid, 0.0f)).bits, b) << std::hex << b;
    EXPECT_EQ(half(std::nextafter(mid, 1e9f)).bits, b + 1) << std::hex << b;
    EXPECT_EQ(half(-mid).bits, 0x8000u | even);
  }
}

TEST(BFloat16, ConversionsRoundToNearestEven) {
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(bfloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(bfloat16(1.0f + std::ldexp(3.0f, -8)).bits, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(bfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)).bits, 0x3f81);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds to inf
  EXPECT_EQ(bfloat16(bits_float(0x7f7f7fffu)).bits, 0x7f7f);            // largest finite stays
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(bfloat16(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  EXPECT_EQ(bfloat16(bits_float(0x00010000u)).bits, 0x0001);  // subnormal kept exactly
  EXPECT_EQ(bfloat16(bits_float(0x00008000u)).bits, 0x0000);  // tie -> even (0)
  EXPECT_EQ(bfloat16(bits_float(0x00018000u)).bits, 0x0002);  // tie -> even (2)
  EXPECT_EQ(bfloat16(-0.0f).bits, 0x8000);
  // NaN stays NaN, including a NaN whose payload sits only in the low 16 bits
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(bits_float(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(bits_float(0xff800001u)))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_from_bits(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(f))));
      continue;
    }
    ASSERT_EQ(bfloat16(f).bits, b) << std::hex << b;
    ASSERT_EQ(float_bits(f), b << 16);
  }
}

TEST(Half, TensorsStoreHalfBits) {
  Tensor t = from_vector<float>({1.0f, 65520.0f, std::ldexp(1.0f, -25)}, {3}).astype(Float16);
  const half* p = t.data<half>();
  EXPECT_EQ(p[0].bits, 0x3c00);
  EXPECT_EQ(p[1].bits, 0x7c00);
  EXPECT_EQ(p[2].bits, 0x0000);
  Tensor b = tensor<float>({1.0f + std::ldexp(3.0f, -8)}).astype(BFloat16);
  EXPECT_EQ(b.data<bfloat16>()[0].bits, 0x3f82);
  EXPECT_THROW(t.data<float>(), DTypeError);
}

// fill takes memset for all-zero bits; a negative zero, a non-zero value and strided
// destinations keep the element loop. Every dtype, contiguous and strided, over garbage.
TEST(DType, FillWritesZeroAndNegativeZeroBitsInEveryDType) {
  for (DType dt : {Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = full({3, 40}, 1.0, dt);
    const std::vector<unsigned char> ones_bits(static_cast<const unsigned char*>(t.data_ptr()),
                                               static_cast<const unsigned char*>(t.data_ptr()) + t.nbytes());
    t.fill_(0.0);
    const auto* b = static_cast<const unsigned char*>(t.data_ptr());
    EXPECT_TRUE(std::all_of(b, b + t.nbytes(), [](unsigned char c) { return c == 0; }));
    Tensor s = full({3, 40}, 1.0, dt);
    s.index({Slice(), Slice(0, 40, 2)}).fill_(0.0);  // every other column: zero there, one between
    EXPECT_EQ(sum(s.astype(Float64)).item<double>(), 60.0);
    EXPECT_EQ(std::memcmp(s.index({Slice(), Slice(1, 40, 2)}).copy().data_ptr(), ones_bits.data(), s.nbytes() / 2), 0);
    if (is_floating(dt)) {
      Tensor n = zeros({7}, dt);
      n.fill_(-0.0);
      for (int64_t i = 0; i < 7; ++i) EXPECT_TRUE(std::signbit(n.index({i}).item<double>()));
    }
  }
}

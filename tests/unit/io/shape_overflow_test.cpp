// Size arithmetic is checked once, in shape_numel / shape_nbytes / checked_mul / checked_add
// (include/loom/core/shape.h): a shape whose nonzero sizes multiply (times the item size) past
// int64 is a ShapeError wherever it would arise — creation, views, op results, file headers —
// instead of a short buffer and an out-of-bounds read or write.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/data/idx.h>
#include <loom/data/npy.h>
#include <loom/io/safetensors.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/manipulation.h>
#include <loom/ops/pooling.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "unit/common/core_test_util.h"
#include "unit/ops/ops_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::iota;
using loom_test::values;

namespace {
constexpr int64_t kBig = int64_t(1) << 62;
const std::string kLimit = "9223372036854775807";
}  // namespace

TEST(ShapeOverflow, ShapeFunctionsCheckEveryProduct) {
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(shape_numel({0, 5}), 0);
  EXPECT_EQ(shape_nbytes({2, 3}, 8), 48);
  EXPECT_EQ(shape_nbytes({0, kBig}, 1), 0);  // the other sizes fit: valid
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { shape_numel({int64_t(1) << 32, int64_t(1) << 32}); }),
                           {"(4294967296, 4294967296)", kLimit}));
  // a zero size does not hide an overflowing product of the others
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { shape_numel({0, kBig, kBig}); }),
                           {"(0, 4611686018427387904, 4611686018427387904)", kLimit}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { shape_nbytes({kBig, 2}, 4, "op"); }),
                           {"op:", "item size (4 bytes)", kLimit}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { shape_numel({3, -2}); }), {"negative", "-2", "axis 1"}));
  EXPECT_EQ(checked_mul(kBig, 1, "x"), kBig);
  EXPECT_THROW(checked_mul(kBig, 2, "x"), ShapeError);
  EXPECT_THROW(checked_add(std::numeric_limits<int64_t>::max(), 1, "x"), ShapeError);
}

TEST(ShapeOverflow, CreationRejectsOverflowingShapes) {
  // used to get a 16-byte buffer for (2^62 + 1) * 4 float32 elements
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { zeros({kBig + 1, 4}); }),
                           {"zeros", "(4611686018427387905, 4)", kLimit}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { empty({kBig, 2}, Float64); }), {"empty"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { ones({0, kBig, kBig}); }), {"ones"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { full({2, -1}, 1.0); }), {"full", "negative"}));
  // eye(2^32) used to write out of bounds (n * m wrapped to 0)
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] { eye(int64_t(1) << 32); }), {"eye", "(4294967296, 4294967296)"}));
  EXPECT_THROW(linspace(0, 1, kBig), ShapeError);
  EXPECT_THROW(arange(0.0, 1e30), ShapeError);
  EXPECT_THROW(arange(0.0, std::numeric_limits<double>::infinity()), ShapeError);
  EXPECT_THROW(arange(0.0, std::nan("")), ValueError);
  // the rewritten eye / arange / linspace keep their values
  EXPECT_EQ(values(eye(3, 4, 1)), (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(values(eye(3, std::nullopt, -2)), (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(values(eye(2, 2, std::numeric_limits<int64_t>::min())), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(eye(2, 2, std::numeric_limits<int64_t>::max())), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(arange(1.0, 2.0, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(values<int64_t>(arange(3)), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(values(linspace(0, 1, 5)), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
}

TEST(ShapeOverflow, ViewsAndOpResultsRejectOverflowingShapes) {
  Tensor s = scalar_tensor(1.0f);
  EXPECT_THROW(broadcast_to(s, {kBig, kBig}), ShapeError);
  EXPECT_THROW(broadcast_to(s, {0, kBig, kBig}), ShapeError);
  EXPECT_THROW(reshape(zeros({0}), {0, kBig, kBig}), ShapeError);
  EXPECT_THROW(reshape(zeros({0}), {-1, kBig, kBig}), ShapeError);
  // two valid operands whose broadcast result overflows
  Tensor col = broadcast_to(s, {int64_t(1) << 40, 1}), row = broadcast_to(s, {1, int64_t(1) << 40});
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { add(col, row); }), {"add", kLimit}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { matmul(col, row); }), {"matmul", kLimit}));
  // sizes computed from user numbers
  Tensor wide = broadcast_to(scalar_tensor(true), {kBig});
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { tile(wide, {4}); }), {"tile"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { repeat(wide, 4, 0); }), {"repeat"}));
  Tensor empty_wide = zeros({0, kBig}, Bool);
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { concatenate({empty_wide, empty_wide}, 1); }), {"concatenate"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([] {
                             pad(zeros({2}), {{std::numeric_limits<int64_t>::max(), 1}});
                           }),
                           {"pad"}));
  Tensor x = zeros({1, 1, 3, 3}), w = zeros({1, 1, 2, 2});
  // a padding past 2^31 is refused before any shape is computed (loom::conv_padding's rule)
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] {
                             conv2d(x, w, Tensor(), 1, std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
                           }),
                           {"conv2d", "padding"}));
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { conv2d(x, zeros({1, 1, 3, 3}), Tensor(), 1, 0, kBig); }),
                           {"conv2d"}));  // dilation * (kernel - 1) = 2^63
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { max_pool2d(x, kBig, 1, 0, 4); }), {"max_pool2d"}));
  // slice steps of any size: lengths and strides computed without overflow
  Tensor v = iota({5});
  EXPECT_EQ(values(slice(v, 0, 1, std::nullopt, std::numeric_limits<int64_t>::max())), (std::vector<double>{1}));
  EXPECT_EQ(values(slice(v, 0, std::nullopt, std::nullopt, std::numeric_limits<int64_t>::min())),
            (std::vector<double>{4}));
  EXPECT_EQ(values(slice(v, 0, 4, 0, -3)), (std::vector<double>{4, 1}));
}

TEST(ShapeOverflow, ViewsMustLieInsideTheirStorage) {
  Tensor base = zeros({4});
  EXPECT_NO_THROW(Tensor(base.storage(), {2, 2}, {2, 1}, 0, Float32));
  EXPECT_NO_THROW(Tensor(base.storage(), {4}, {-1}, 3, Float32));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Tensor(base.storage(), {4}, {1}, 1, Float32); }),
                           {"outside its storage", "4 elements"}));
  EXPECT_THROW(Tensor(base.storage(), {2}, {-1}, 0, Float32), ValueError);
  EXPECT_THROW(Tensor(base.storage(), {2}, {std::numeric_limits<int64_t>::max()}, 0, Float32), ValueError);
  EXPECT_THROW(Tensor(base.storage(), {3}, {1}, 0, Float64), ValueError);  // 24 bytes in a 16-byte storage
  EXPECT_THROW(Tensor(base.storage(), {2, 2}, {1}, 0, Float32), ShapeError);
  EXPECT_NO_THROW(Tensor(base.storage(), {0, 100}, {100, 1}, 0, Float32));  // no element
}

TEST(ShapeOverflow, ReadersRejectOverflowingDeclaredShapes) {
  // (0, 2^62, 2^62) used to load, then .sum({0}) made a (2^62, 2^62) tensor over 0 bytes
  const std::string huge = "0, 4611686018427387904, 4611686018427387904";
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + huge + "), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string npy = "\x93NUMPY\x01";
    npy += '\0';
    npy += static_cast<char>(header.size() & 0xff);
    npy += static_cast<char>(header.size() >> 8);
    npy += header;
    EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { data::npy_from_bytes(npy, "huge.npy"); }),
                             {"load_npy", "(" + huge + ")", kLimit}));
  }
  {
    const std::string json = R"({"a":{"dtype":"F32","shape":[)" + std::string("0,4611686018427387904,4611686018427387904") +
                             R"(],"data_offsets":[0,0]}})";
    std::string st(8, '\0');
    uint64_t n = json.size();
    std::memcpy(st.data(), &n, 8);  // little-endian host
    st += json;
    EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { io::decode_safetensors(st); }),
                             {"load_safetensors", "(" + huge + ")"}));
  }
  {
    loom_test::TempDir dir;
    const std::string path = dir / "huge.idx";
    std::ofstream f(path, std::ios::binary);
    const unsigned char head[] = {0, 0, 0x0D, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    f.close();
    EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { data::read_idx(path); }), {"read_idx", "4294967295"}));
  }
}

// SparseTensor: validated creation, coalesce, conversions (docs/sparse.md). The product with a
// dense tensor is checked against torch.sparse.mm in tests/reference (op "sparse.mm").
#include <gtest/gtest.h>

#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/memory.h>
#include <loom/core/parallel.h>
#include <loom/core/scalar.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/linalg.h>
#include <loom/ops/random.h>
#include <loom/ops/reduction.h>
#include <loom/ops/sparse.h>

#include <limits>
#include <string>

using namespace loom;

namespace {

Tensor ids(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST(Sparse, CooCreationAndDense) {
  // (2, 3): duplicates at (0, 2) add up
  SparseTensor s = SparseTensor::coo(ids({0, 1, 0, 2, 0, 2}, {2, 3}), tensor<float>({1, 2, 3}), {2, 3});
  EXPECT_EQ(s.layout(), SparseLayout::COO);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.nnz(), 3);
  EXPECT_EQ(s.dtype(), Float32);
  EXPECT_FALSE(s.is_coalesced());
  EXPECT_EQ(s.to_dense().to_vector<float>(), (std::vector<float>{0, 0, 4, 2, 0, 0}));
  SparseTensor c = s.coalesce();
  EXPECT_TRUE(c.is_coalesced());
  EXPECT_EQ(c.nnz(), 2);
  EXPECT_EQ(c.indices().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(c.values().to_vector<float>(), (std::vector<float>{4, 2}));
  EXPECT_EQ(c.to_dense().to_vector<float>(), s.to_dense().to_vector<float>());
}

TEST(Sparse, ThreeDimensionalCoo) {
  SparseTensor s = SparseTensor::coo(ids({1, 0, 2, 1, 3, 0}, {3, 2}), tensor<double>({5, 7}), {2, 3, 4});
  Tensor d = s.to_dense();
  EXPECT_EQ(d.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(d.at({1, 2, 3}), 5);
  EXPECT_EQ(d.at({0, 1, 0}), 7);
  EXPECT_EQ(sum(d).item<double>(), 12);
  EXPECT_TRUE(s.coalesce().is_coalesced());
  EXPECT_EQ(s.coalesce().indices().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 2, 0, 3}));
}

TEST(Sparse, FromDenseCsrRoundTrips) {
  Tensor d = from_vector<float>({0, 2, 0, 0, 3, 0, 4, 0, 0, 0, 0, 5}, {3, 4});
  SparseTensor coo = SparseTensor::from_dense(d);
  EXPECT_EQ(coo.nnz(), 4);
  EXPECT_TRUE(coo.is_coalesced());
  SparseTensor csr = SparseTensor::from_dense(d, SparseLayout::CSR);
  EXPECT_EQ(csr.layout(), SparseLayout::CSR);
  EXPECT_EQ(csr.crow_indices().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(csr.col_indices().to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2, 3}));
  EXPECT_EQ(csr.to_dense().to_vector<float>(), d.to_vector<float>());
  EXPECT_EQ(csr.to_coo().indices().to_vector<int64_t>(), coo.indices().to_vector<int64_t>());
  EXPECT_EQ(coo.to_csr().col_indices().to_vector<int64_t>(), csr.col_indices().to_vector<int64_t>());
  // an all-zero tensor: nnz 0
  EXPECT_EQ(SparseTensor::from_dense(zeros({2, 2})).nnz(), 0);
  EXPECT_EQ(SparseTensor::from_dense(zeros({2, 2})).to_dense().to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(Sparse, CsrWithDuplicatesCoalesces) {
  // row 0 holds column 1 twice: not coalesced, and to_dense adds them
  SparseTensor s = SparseTensor::csr(ids({0, 2, 3}, {3}), ids({1, 1, 0}, {3}), tensor<double>({1, 2, 4}), {2, 2});
  EXPECT_FALSE(s.is_coalesced());
  EXPECT_EQ(s.to_dense().to_vector<double>(), (std::vector<double>{0, 3, 4, 0}));
  SparseTensor c = s.coalesce();
  EXPECT_EQ(c.layout(), SparseLayout::CSR);
  EXPECT_EQ(c.nnz(), 2);
  EXPECT_EQ(c.crow_indices().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(c.values().to_vector<double>(), (std::vector<double>{3, 4}));
}

TEST(Sparse, GradientsFlowToValues) {
  Tensor v = tensor<double>({1, 2, 3}).requires_grad_();
  SparseTensor s = SparseTensor::coo(ids({0, 1, 0, 1, 0, 1}, {2, 3}), v, {2, 2});
  // to_dense and coalesce are differentiable in the values
  Tensor w = from_vector<double>({1, 10, 100, 1000}, {2, 2});
  sum(s.to_dense() * w).backward();
  EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{10, 100, 10}));
  v.zero_grad();
  sum(s.coalesce().values()).backward();
  EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

TEST(Sparse, MatmulMatchesDense) {
  SparseTensor s = SparseTensor::coo(ids({0, 2, 0, 1, 1, 3, 1, 1}, {2, 4}), tensor<double>({1, -2, 3, 0.5}), {3, 4});
  Tensor b = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  EXPECT_EQ(matmul(s, b).to_vector<double>(), matmul(s.to_dense(), b).to_vector<double>());
  EXPECT_EQ(matmul(s.to_csr(), b).to_vector<double>(), matmul(s.to_dense(), b).to_vector<double>());
  // the result does not depend on the thread count
  const int n = get_num_threads();
  Tensor big_b = randn({50, 7}, Float64);
  SparseTensor big = SparseTensor::from_dense(randn({300, 50}, Float64) * (uniform({300, 50}, 0, 1, Float64) < 0.1));
  set_num_threads(1);
  std::vector<double> one = matmul(big, big_b).to_vector<double>();
  set_num_threads(std::max(2, n));
  EXPECT_EQ(matmul(big, big_b).to_vector<double>(), one);
  set_num_threads(n);
}

TEST(Sparse, BadInputNamesWhatIsWrong) {
  const Tensor v = tensor<float>({1, 2});
  auto m = message_of<IndexError>([&] { SparseTensor::coo(ids({0, 5, 1, 1}, {2, 2}), v, {2, 3}); });
  EXPECT_NE(m.find("index 5"), std::string::npos) << m;
  EXPECT_NE(m.find("valid: 0 to 1"), std::string::npos) << m;
  m = message_of<IndexError>([&] { SparseTensor::coo(ids({0, -1, 1, 1}, {2, 2}), v, {2, 3}); });
  EXPECT_NE(m.find("index -1"), std::string::npos) << m;
  m = message_of<ShapeError>([&] { SparseTensor::coo(ids({0, 1, 1}, {3, 1}), v, {2, 3}); });
  EXPECT_NE(m.find("(ndim, nnz) = (2, 2)"), std::string::npos) << m;
  m = message_of<DTypeError>([&] { SparseTensor::coo(ids({0, 1, 1, 1}, {2, 2}), tensor<int32_t>({1, 2}), {2, 3}); });
  EXPECT_NE(m.find("valid: float32, float64"), std::string::npos) << m;
  m = message_of<DTypeError>([&] { SparseTensor::coo(tensor<float>({0, 1, 1, 1}).reshape({2, 2}), v, {2, 3}); });
  EXPECT_NE(m.find("valid: int32, int64"), std::string::npos) << m;
  EXPECT_THROW(SparseTensor::coo(ids({0, 1, 1, 1}, {2, 2}), v, {2, -3}), ShapeError);
  EXPECT_THROW(SparseTensor::coo(ids({}, {0, 2}), v, {}), ShapeError);
  // a shape whose element count overflows int64 is refused before anything is allocated
  const int64_t big = int64_t{1} << 40;
  EXPECT_THROW(SparseTensor::coo(ids({0, 0}, {2, 1}), tensor<float>({1}), {big, big}), ShapeError);
  // CSR
  m = message_of<ValueError>([&] { SparseTensor::csr(ids({0, 1, 2}, {3}), ids({0}, {1}), tensor<float>({1}), {2, 2}); });
  EXPECT_NE(m.find("end at nnz = 1"), std::string::npos) << m;
  m = message_of<ValueError>(
      [&] { SparseTensor::csr(ids({0, 2, 1, 2}, {4}), ids({0, 1}, {2}), tensor<float>({1, 2}), {3, 2}); });
  EXPECT_NE(m.find("non-decreasing"), std::string::npos) << m;
  m = message_of<IndexError>([&] { SparseTensor::csr(ids({0, 1, 1}, {3}), ids({2}, {1}), tensor<float>({1}), {2, 2}); });
  EXPECT_NE(m.find("column index 2"), std::string::npos) << m;
  EXPECT_THROW(SparseTensor::csr(ids({0, 1}, {2}), ids({0}, {1}), tensor<float>({1}), {1, 2, 2}), ShapeError);
  EXPECT_THROW(SparseTensor::from_dense(zeros({2, 2, 2}), SparseLayout::CSR), ShapeError);
  EXPECT_THROW(SparseTensor::from_dense(zeros({2, 2}, Int32)), DTypeError);
  EXPECT_THROW(SparseTensor().nnz(), ValueError);
  EXPECT_THROW(SparseTensor::from_dense(zeros({2, 2}), SparseLayout::CSR).indices(), ValueError);
  // matmul operands
  SparseTensor s = SparseTensor::from_dense(eye(3));
  m = message_of<ShapeError>([&] { matmul(s, zeros({4, 2})); });
  EXPECT_NE(m.find("inner dimensions differ"), std::string::npos) << m;
  EXPECT_THROW(matmul(s, zeros({3})), ShapeError);
  EXPECT_THROW(matmul(s, zeros({3, 2}, Int64)), DTypeError);
}

TEST(Sparse, IndicesAreCopiedAtCreation) {
  // writing to the caller's index tensor afterwards cannot put an entry out of range
  Tensor idx = ids({0, 1}, {2, 1});
  SparseTensor s = SparseTensor::coo(idx, tensor<float>({1}), {2, 2});
  idx.fill_(100);
  EXPECT_EQ(s.indices().to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.to_dense().at({0, 1}), 1);
}

TEST(Sparse, ManyRowsWithoutColumnsAreBoundedByTheAllocator) {
  // (2^40, 0) is a valid shape with no entries: what its CSR row pointers or a product would need
  // goes through the allocator and its limit (OutOfMemoryError), never a raw std::vector
  SparseTensor s = SparseTensor::coo(ids({}, {2, 0}), zeros({0}), {int64_t{1} << 40, 0});
  struct Reset {
    ~Reset() { set_memory_limit(-1); }
  } reset;
  set_memory_limit(int64_t{1} << 30);
  EXPECT_THROW(s.to_csr(), OutOfMemoryError);
  EXPECT_THROW(matmul(s, zeros({0, 1})), OutOfMemoryError);
}

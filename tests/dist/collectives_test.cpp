// dist collectives against the obvious single-process results, for every dtype and sizes 0, 1,
// odd and large (not a multiple of anything), contiguous and strided; run by ctest at 1 process
// (no mpirun) and under mpirun with 2 and 3 (tests/CMakeLists.txt). Values are small integers
// (exact in every dtype and in any summation order), so results compare exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <cstdlib>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "loom/dist/dist.h"
#include "loom/loom.h"

namespace loom {
namespace {

using dist::ReduceOp;

const std::vector<DType> kAllDTypes = {Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8, Bool};
const std::vector<int64_t> kSizes = {0, 1, 7, 100003};

// Element i of rank r's tensor, exact in `dtype` and such that sums over 3 ranks stay exact.
double value(DType dtype, int r, int64_t i) {
  const int64_t k = (i * 7 + r * 5) % 13;
  switch (dtype) {
    case DType::Bool: return (i + r) % 3 == 0 ? 1 : 0;
    case DType::UInt8: return static_cast<double>((i * 7 + r * 5) % 80);
    case DType::Int32: return static_cast<double>((i * 7919 + r * 104729) % 200001 - 100000);
    case DType::Int64: return static_cast<double>((k - 6) * 1000000000000LL + i);  // beyond int32
    default: return static_cast<double>(k - 6);
  }
}

Tensor make(DType dtype, const Shape& shape, int r) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(dtype, r, i);
  return from_vector(v, shape).astype(dtype);
}

// The reduction over every rank, computed here in float64 and converted to dtype once.
Tensor expected_reduce(DType dtype, const Shape& shape, ReduceOp op) {
  const int size = dist::size();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double acc = value(dtype, 0, i);
    for (int r = 1; r < size; ++r) {
      const double x = value(dtype, r, i);
      if (op == ReduceOp::Max || dtype == Bool) acc = std::max(acc, x);
      else acc += x;
    }
    if (op == ReduceOp::Mean) acc /= size;
    v[static_cast<size_t>(i)] = acc;
  }
  return from_vector(v, shape).astype(dtype);
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.astype(Float64).to_vector<double>();
  const auto w = want.astype(Float64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(g[i], w[i]) << what << ": element " << i << " of " << g.size() << " on rank " << dist::rank();
}

std::string label(DType dtype, ReduceOp op, int64_t n) {
  return std::string(dtype_name(dtype)) + " " + dist::reduce_op_name(op) + " n=" + std::to_string(n);
}

TEST(DistContext, RankSizeAndLocalRank) {
  EXPECT_GE(dist::size(), 1);
  EXPECT_GE(dist::rank(), 0);
  EXPECT_LT(dist::rank(), dist::size());
  EXPECT_TRUE(dist::is_initialized());
  // one machine: every process is local
  EXPECT_EQ(dist::local_size(), dist::size());
  EXPECT_EQ(dist::local_rank(), dist::rank());
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) EXPECT_EQ(dist::local_rank(), std::atoi(env));
  if (const char* env = std::getenv("OMPI_COMM_WORLD_SIZE")) EXPECT_EQ(dist::size(), std::atoi(env));
  else EXPECT_EQ(dist::size(), 1);  // run without mpirun: a job of one
}

// The processes of a machine split its cores, unless the thread count was chosen (ctest's
// dist_threads_np2 runs this without LOOM_NUM_THREADS; the other dist ctests set it to 1).
TEST(DistContext, ProcessesOfAMachineShareItsCores) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* env = std::getenv("LOOM_NUM_THREADS")) EXPECT_EQ(get_num_threads(), std::atoi(env));
  else EXPECT_EQ(get_num_threads(), std::max(1, cores / dist::local_size()));
  const int before = get_num_threads();
  share_cores(1);  // the count is the Context's choice or the environment's: kept
  if (std::getenv("LOOM_NUM_THREADS")) EXPECT_EQ(get_num_threads(), before);
  EXPECT_THROW(share_cores(0), ValueError);
  set_num_threads(1);
  share_cores(1);  // chosen by the program: kept
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(before);
}

TEST(DistContext, SecondContextIsAnError) {
  EXPECT_THROW({ dist::Context again; }, dist::DistError);
  // and the first still works
  Tensor t = ones({3}, Int32);
  dist::allreduce(t);
  expect_equal(t, full({3}, dist::size(), Int32), "after a refused second Context");
}

TEST(DistAllreduce, EveryDTypeOpAndSize) {
  for (DType dtype : kAllDTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      if (op == ReduceOp::Mean && !is_floating(dtype)) continue;  // DTypeError, below
      for (int64_t n : kSizes) {
        Tensor t = make(dtype, {n}, dist::rank());
        void* before = t.data_ptr();
        Tensor& r = dist::allreduce(t, op);
        EXPECT_EQ(&r, &t);
        EXPECT_EQ(t.data_ptr(), before) << "a contiguous tensor is reduced in its own memory";
        expect_equal(t, expected_reduce(dtype, {n}, op), label(dtype, op, n));
      }
    }
}

TEST(DistAllreduce, ZeroDimAndMultiDim) {
  for (DType dtype : kAllDTypes) {
    Tensor s = make(dtype, {}, dist::rank());
    dist::allreduce(s, ReduceOp::Max);
    expect_equal(s, expected_reduce(dtype, {}, ReduceOp::Max), label(dtype, ReduceOp::Max, 1) + " 0-d");
    Tensor m = make(dtype, {3, 0, 5}, dist::rank());
    dist::allreduce(m);
    EXPECT_EQ(m.shape(), (Shape{3, 0, 5}));
    Tensor t = make(dtype, {5, 3, 7}, dist::rank());
    dist::allreduce(t);
    expect_equal(t, expected_reduce(dtype, {5, 3, 7}, ReduceOp::Sum), label(dtype, ReduceOp::Sum, 105) + " 3-d");
  }
}

// Views are reduced through a contiguous copy and written back into the viewed elements only.
TEST(DistAllreduce, NonContiguousViews) {
  for (DType dtype : kAllDTypes) {
    // transposed: the view's logical order differs from memory order
    Tensor base = make(dtype, {7, 9}, dist::rank());
    Tensor view = base.transpose();
    ASSERT_FALSE(view.is_contiguous());
    dist::allreduce(view, ReduceOp::Max);
    expect_equal(base, expected_reduce(dtype, {7, 9}, ReduceOp::Max), label(dtype, ReduceOp::Max, 63) + " transposed");

    // every other element: the ones between stay as they were
    Tensor wide = make(dtype, {2 * 1001}, dist::rank());
    Tensor strided = wide.index({Slice(None, None, 2)});
    ASSERT_FALSE(strided.is_contiguous());
    const Tensor untouched = wide.index({Slice(1, None, 2)}).copy();
    Tensor want = expected_reduce(dtype, {2 * 1001}, ReduceOp::Sum).index({Slice(None, None, 2)});
    dist::allreduce(strided, ReduceOp::Sum);
    expect_equal(strided, want, label(dtype, ReduceOp::Sum, 1001) + " strided");
    expect_equal(wide.index({Slice(1, None, 2)}), untouched, label(dtype, ReduceOp::Sum, 1001) + " between the strides");
  }
}

// Float32 sums and means of up to 256 elements (float16/bfloat16 too: reduced in float32)
// travel inside the signature block, larger ones and the other ops after it
// (docs/distributed.md, "Ranks that disagree"): both sides of the limit, contiguous and
// strided, give the same results, in the tensor's own memory, counted as an in-place write.
TEST(DistAllreduce, BothSidesOfTheInlineLimit) {
  for (DType dtype : {Float32, Float16, BFloat16, Float64, Int32})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      if (op == ReduceOp::Mean && !is_floating(dtype)) continue;
      for (int64_t n : {255, 256, 257}) {
        Tensor t = make(dtype, {n}, dist::rank());
        void* before = t.data_ptr();
        const uint64_t version = t.storage()->version();
        dist::allreduce(t, op);
        EXPECT_EQ(t.data_ptr(), before);
        EXPECT_GT(t.storage()->version(), version) << "an in-place write";
        expect_equal(t, expected_reduce(dtype, {n}, op), label(dtype, op, n));

        Tensor wide = make(dtype, {2 * n}, dist::rank());
        Tensor strided = wide.index({Slice(None, None, 2)});
        const Tensor untouched = wide.index({Slice(1, None, 2)}).copy();
        dist::allreduce(strided, op);
        expect_equal(strided, expected_reduce(dtype, {2 * n}, op).index({Slice(None, None, 2)}),
                     label(dtype, op, n) + " strided");
        expect_equal(wide.index({Slice(1, None, 2)}), untouched, label(dtype, op, n) + " between the strides");
      }
    }
}

TEST(DistAllreduce, MeanOfIntegersIsADTypeError) {
  for (DType dtype : {Int32, Int64, UInt8, Bool}) {
    Tensor t = make(dtype, {4}, dist::rank());
    try {
      dist::allreduce(t, ReduceOp::Mean);
      ADD_FAILURE() << "no error for mean of " << dtype_name(dtype);
    } catch (const DTypeError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("dist::allreduce(mean) of ") + dtype_name(dtype) + " (4,)"),
                std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("floating"), std::string::npos) << e.what();
    }
  }
}

TEST(DistAllreduce, TensorThatRequiresGrad) {
  Tensor p = make(Float32, {6}, dist::rank()).requires_grad_();
  dist::allreduce(p);
  expect_equal(p.detach(), expected_reduce(Float32, {6}, ReduceOp::Sum), "requires_grad leaf");
}

TEST(DistBroadcast, EveryDTypeSizeAndRoot) {
  for (DType dtype : kAllDTypes)
    for (int root : {0, dist::size() - 1})
      for (int64_t n : kSizes) {
        Tensor t = make(dtype, {n}, dist::rank());
        void* before = t.data_ptr();
        dist::broadcast(t, root);
        EXPECT_EQ(t.data_ptr(), before);
        expect_equal(t, make(dtype, {n}, root), std::string(dtype_name(dtype)) + " root " + std::to_string(root) +
                                                    " n=" + std::to_string(n));
      }
}

TEST(DistBroadcast, NonContiguousAndZeroDim) {
  for (DType dtype : kAllDTypes) {
    Tensor base = make(dtype, {5, 11}, dist::rank());
    Tensor view = base.transpose();
    dist::broadcast(view, dist::size() - 1);
    expect_equal(base, make(dtype, {5, 11}, dist::size() - 1), std::string(dtype_name(dtype)) + " transposed");
    Tensor s = make(dtype, {}, dist::rank());
    dist::broadcast(s);
    expect_equal(s, make(dtype, {}, 0), std::string(dtype_name(dtype)) + " 0-d");
  }
}

TEST(DistBroadcast, RootOutOfRange) {
  Tensor t = zeros({2});
  for (int root : {-1, dist::size()}) {
    try {
      dist::broadcast(t, root);
      ADD_FAILURE() << "no error for root " << root;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("root " + std::to_string(root) + " is not a rank; valid: 0 to " +
                                           std::to_string(dist::size() - 1)),
                std::string::npos) << e.what();
    }
  }
}

// Rank r contributes rows(r) rows: different on each rank, none on rank 0 in one case.
TEST(DistAllgather, ConcatenatesAlongAxisZeroInRankOrder) {
  for (DType dtype : kAllDTypes)
    for (int64_t base_rows : {0, 1, 7, 33337}) {
      auto rows = [&](int r) { return r == 0 ? base_rows : base_rows + r; };
      const Tensor mine = make(dtype, {rows(dist::rank()), 3}, dist::rank());
      std::vector<Tensor> parts;
      for (int r = 0; r < dist::size(); ++r) parts.push_back(make(dtype, {rows(r), 3}, r));
      const Tensor got = dist::allgather(mine);
      expect_equal(got, concatenate(parts, 0), std::string(dtype_name(dtype)) + " rows " + std::to_string(base_rows));
      EXPECT_FALSE(got.shares_storage_with(mine));
    }
}

TEST(DistAllgather, ZeroDimNonContiguousAndEmptyRows) {
  for (DType dtype : kAllDTypes) {
    std::vector<Tensor> scalars, views;
    for (int r = 0; r < dist::size(); ++r) {
      scalars.push_back(make(dtype, {1}, r));
      views.push_back(make(dtype, {4, 3}, r).transpose());
    }
    expect_equal(dist::allgather(make(dtype, {}, dist::rank())), concatenate(scalars, 0),
                 std::string(dtype_name(dtype)) + " 0-d");
    const Tensor view = make(dtype, {4, 3}, dist::rank()).transpose();
    ASSERT_FALSE(view.is_contiguous());
    expect_equal(dist::allgather(view), concatenate(views, 0), std::string(dtype_name(dtype)) + " transposed");
    const Tensor empty_rows = dist::allgather(make(dtype, {2, 0}, dist::rank()));
    EXPECT_EQ(empty_rows.shape(), (Shape{2 * dist::size(), 0}));
  }
}

TEST(DistBarrier, Returns) {
  dist::barrier();
  dist::barrier();
}

// Every rank throws the same error naming both sides; the ranks stay in step afterwards.
TEST(DistMismatch, ShapesDTypesAndCallsAreNamed) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun by ctest)";
  const int r = dist::rank();
  const int last = dist::size() - 1;
  {
    Tensor t = zeros({2, r == last ? 4 : 3});
    try {
      dist::allreduce(t);
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 0 called dist::allreduce(sum) of float32 (2, 3)"), std::string::npos) << m;
      EXPECT_NE(m.find("rank " + std::to_string(last) + " called dist::allreduce(sum) of float32 (2, 4)"),
                std::string::npos) << m;
    }
  }
  {
    Tensor t = zeros({5}, r == last ? Float64 : Float32);
    EXPECT_THROW(dist::broadcast(t), DTypeError);
  }
  {
    Tensor t = zeros({5});
    try {
      if (r == last) dist::broadcast(t);
      else dist::allreduce(t, ReduceOp::Max);
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("called dist::broadcast(root 0)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("called dist::allreduce(max)"), std::string::npos) << e.what();
    }
  }
  {
    Tensor t = zeros({5});
    try {
      if (r == last) dist::barrier();
      else dist::allreduce(t);
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(last) + " called dist::barrier"), std::string::npos)
          << e.what();
    }
  }
  {
    Tensor t = r == last ? Tensor() : zeros({2});
    EXPECT_THROW(dist::allreduce(t), DTypeError);  // an undefined tensor has no dtype
  }
  {
    // allgather: axis 0 may differ, the other axes may not
    try {
      dist::allgather(zeros({2, r == last ? 2 : 3}));
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("axis 0 may differ"), std::string::npos) << e.what();
    }
  }
  Tensor t = ones({4}, Int64);
  dist::allreduce(t);
  expect_equal(t, full({4}, dist::size(), Int64), "after the errors");
}

// Disagreements where one rank's data rides in the signature block and another's does not, or
// both ride in it: still named, with the typed error, on every rank.
void expect_small_mismatches_named() {
  const int r = dist::rank();
  const int last = dist::size() - 1;
  {
    Tensor t = zeros({r == last ? 257 : 256});  // inlined here, not there
    try {
      dist::allreduce(t);
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 0 called dist::allreduce(sum) of float32 (256,)"), std::string::npos) << m;
      EXPECT_NE(m.find("rank " + std::to_string(last) + " called dist::allreduce(sum) of float32 (257,)"),
                std::string::npos) << m;
    }
  }
  {
    Tensor t = r == last ? zeros({3, 2}) : zeros({2, 3});  // the same count of elements
    try {
      dist::allreduce(t, ReduceOp::Mean);
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("float32 (3, 2)"), std::string::npos) << e.what();
    }
  }
  {
    Tensor t = zeros({4});
    try {
      dist::allreduce(t, r == last ? ReduceOp::Mean : ReduceOp::Sum);
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 called dist::allreduce(sum)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("called dist::allreduce(mean)"), std::string::npos) << e.what();
    }
  }
  {
    Tensor t = zeros({4}, r == last ? Float16 : Float32);  // both reduced in float32
    try {
      dist::allreduce(t);
      ADD_FAILURE() << "no error";
    } catch (const DTypeError& e) {
      EXPECT_NE(std::string(e.what()).find("float16 (4,)"), std::string::npos) << e.what();
    }
  }
  {
    Tensor t = zeros({4}, r == last ? Int32 : Float32);
    EXPECT_THROW(dist::allreduce(t), DTypeError);
  }
  {
    Tensor t = zeros({4});
    try {
      if (r == last) dist::allgather(t);
      else dist::allreduce(t);
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("called dist::allgather of float32 (4,)"), std::string::npos) << e.what();
    }
  }
  Tensor t = ones({4});
  dist::allreduce(t);
  expect_equal(t, full({4}, static_cast<double>(dist::size()), Float32), "after the errors");
}

TEST(DistMismatch, SmallAllreducesAreNamed) {
  if (dist::size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun by ctest)";
  expect_small_mismatches_named();
}

// Jobs too large for the block's float32 sums (more than 65536 ranks) exchange the signatures
// with an MPI_Allgather: the same results and errors, here forced at this job's size.
TEST(DistMismatch, LargeJobsCheckByGatheringSignatures) {
  struct Restore {
    ~Restore() { dist::detail::set_max_summed_ranks(65536); }
  } restore;
  dist::detail::set_max_summed_ranks(dist::size() - 1);
  for (int64_t n : {1, 256, 100003}) {
    Tensor t = make(Float32, {n}, dist::rank());
    dist::allreduce(t, ReduceOp::Mean);
    expect_equal(t, expected_reduce(Float32, {n}, ReduceOp::Mean), label(Float32, ReduceOp::Mean, n) + " gathered");
  }
  dist::barrier();
  if (dist::size() >= 2) expect_small_mismatches_named();
}

TEST(DistErrors, UndefinedTensorOnEveryRank) {
  Tensor t;
  EXPECT_THROW(dist::allreduce(t), ValueError);
  EXPECT_THROW(dist::broadcast(t), ValueError);
  EXPECT_THROW(dist::allgather(t), ValueError);
}

// The communicator returns MPI's errors instead of aborting, and they become DistError.
TEST(DistErrors, MpiErrorsBecomeDistError) {
  int dummy = 0;
  try {
    dist::detail::check(MPI_Bcast(&dummy, -1, MPI_INT, 0, dist::detail::comm()), "MPI_Bcast",
                        "dist::broadcast(root 0) of int32 (3,)");
    ADD_FAILURE() << "a negative count was accepted";
  } catch (const dist::DistError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dist::broadcast(root 0) of int32 (3,) failed in MPI_Bcast: MPI_ERR_COUNT"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace loom

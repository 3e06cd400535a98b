// A compiled graph checks each fed tensor against its Input's declared dtype, as
// Input::set_value does for Layer::operator(): no silent promotion through the graph.
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/merge.h>
#include <loom/ops/creation.h>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

TEST(PlanInputDType, AMismatchedDTypeIsADTypeErrorNamingTheInput) {
  nn::Input x(Shape{-1, 2}, Float32, "features");
  nn::Layer y = x * 2.0;
  Graph g = Graph::build({y});
  Plan plan = g.compile();
  const Tensor ints = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  // used to return float64 (int64 * 2.0 promoted past the declared float32)
  EXPECT_TRUE(contains_all(error_message<DTypeError>([&] { plan(ints); }), {"'features'", "float32", "int64"}));
  EXPECT_THROW(g.as_function()({ints}), DTypeError);
  EXPECT_THROW(plan(ints.astype(Float64)), DTypeError);
  // Layer::operator() reads the Input's value, which set_value checks the same way
  EXPECT_TRUE(contains_all(error_message<DTypeError>([&] { x.set_value(ints); }), {"'features'", "float32", "int64"}));
  // the declared dtype runs and keeps it
  Tensor out = plan(ints.astype(Float32));
  EXPECT_EQ(out.dtype(), Float32);
  x.set_value(ints.astype(Float32));
  EXPECT_EQ(y().dtype(), Float32);
}

// A kernel slot declared beside its op (src/ops/backend.h, KernelSlot): its kernel is filled by
// the slot's name and found with its signature; a slot no kernel fills, one filled twice or one
// filled with another signature is a std::logic_error naming the slot. (The linalg ops run
// through such slots: their own tests and reference cases cover the CPU table's fills.)
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "ops/backend.h"

namespace {

int twice(int x) { return 2 * x; }
double half(double x) { return x / 2; }

std::string logic_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "(no logic_error)";
}

}  // namespace

TEST(KernelSlot, AKernelIsFoundByItsSlotsNameAndSignature) {
  loom::detail::KernelFills fills;
  fills.fill("test.twice", &twice);
  fills.fill("test.half", &half);
  const auto k = reinterpret_cast<int (*)(int)>(fills.find("test.twice", typeid(int(int))));
  EXPECT_EQ(k(3), 6);
  const auto h = reinterpret_cast<double (*)(double)>(fills.find("test.half", typeid(double(double))));
  EXPECT_EQ(h(3), 1.5);
}

TEST(KernelSlot, AnUnfilledTwiceFilledOrMistypedSlotIsRefusedByName) {
  loom::detail::KernelFills fills;
  fills.fill("test.twice", &twice);
  const std::string mistyped = logic_error_of([&] { fills.find("test.twice", typeid(double(double))); });
  EXPECT_NE(mistyped.find("'test.twice'"), std::string::npos) << mistyped;
  EXPECT_NE(mistyped.find("another signature"), std::string::npos) << mistyped;
  const std::string unfilled = logic_error_of([&] { fills.find("test.thrice", typeid(int(int))); });
  EXPECT_NE(unfilled.find("no kernel"), std::string::npos) << unfilled;
  EXPECT_NE(unfilled.find("'test.thrice'"), std::string::npos) << unfilled;
  const std::string twice_filled = logic_error_of([&] { fills.fill("test.twice", &half); });
  EXPECT_NE(twice_filled.find("'test.twice' is filled twice"), std::string::npos) << twice_filled;
}

// A fused fast path's slot (KernelSlot::if_filled, which asks find_if_filled) is null where its device fills no kernel, so
// its op runs the composite instead, and is the kernel where one is filled; a mistyped fill is
// refused by name all the same.
TEST(KernelSlot, AnOptionalSlotIsNullWhereUnfilled) {
  loom::detail::KernelFills fills;
  fills.fill("test.twice", &twice);
  EXPECT_EQ(fills.find_if_filled("test.thrice", typeid(int(int))), nullptr);
  const auto k = reinterpret_cast<int (*)(int)>(fills.find_if_filled("test.twice", typeid(int(int))));
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k(4), 8);
  const std::string mistyped = logic_error_of([&] { fills.find_if_filled("test.twice", typeid(double(double))); });
  EXPECT_NE(mistyped.find("'test.twice'"), std::string::npos) << mistyped;
}

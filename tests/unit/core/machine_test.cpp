// The machine description that reports print next to their timings (core/machine.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "loom/core/error.h"
#include "loom/core/machine.h"
#include "loom/core/parallel.h"

using namespace loom;

TEST(Machine, KernelLevelNeverExceedsTheCpu) {
  EXPECT_LE(static_cast<int>(isa_level()), static_cast<int>(isa_supported()));
  const std::string name = isa_name(isa_level());
  EXPECT_TRUE(name == "baseline" || name == "avx2" || name == "avx512") << name;
}

TEST(Machine, SummaryNamesCpuIsaAndThreads) {
  const std::string s = machine_summary();
  EXPECT_NE(s.find(cpu_model()), std::string::npos) << s;
  EXPECT_NE(s.find(std::string("Loom kernels: ") + isa_name(isa_level())), std::string::npos) << s;
  EXPECT_NE(s.find(std::to_string(get_num_threads()) + " thread"), std::string::npos) << s;
  EXPECT_FALSE(cpu_model().empty());
}

// LOOM_SIMD is read once per process: each case runs in a fresh process (threadsafe death tests
// re-execute the test binary).
TEST(MachineDeathTest, LoomSimdCapsAndRejectsUnknownLevels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("LOOM_SIMD", "baseline", 1);
        std::exit(isa_level() == IsaLevel::Baseline ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("LOOM_SIMD", "avx512", 1);  // a cap above the CPU's level leaves the CPU's level
        std::exit(isa_level() == isa_supported() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("LOOM_SIMD", "sse9", 1);
        try {
          isa_level();
        } catch (const Error& e) {
          const std::string m = e.what();
          std::exit(m.find("sse9") != std::string::npos && m.find("baseline, avx2, avx512") != std::string::npos ? 0 : 1);
        }
        std::exit(2);
      },
      testing::ExitedWithCode(0), "");
}

// Storage over memory Loom does not own (the Python module's zero-copy NumPy and DLPack
// tensors, issue 49): the owner lives exactly as long as the last view, the allocator never
// sees the memory, and writes go through to it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "loom/core/device.h"
#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "loom/core/memory.h"
#include "loom/core/storage.h"
#include "loom/core/tensor.h"
#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

TEST(ExternalStorage, ViewsKeepTheOwnerAliveAndWriteThrough) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = buffer;
  const int64_t allocations_before = memory_stats().allocations;
  Tensor column;
  {
    auto storage = std::make_shared<Storage>(buffer->data(), buffer->size() * sizeof(float), Device::cpu(), buffer);
    EXPECT_TRUE(storage->external());
    EXPECT_EQ(storage->data(), buffer->data());
    const Tensor t(storage, {2, 3}, {3, 1}, 0, DType::Float32);
    column = Tensor(storage, {2}, {3}, 1, DType::Float32);  // t[:, 1], a strided view
    EXPECT_EQ(t.data<float>(), buffer->data());
    buffer.reset();  // the caller lets go: the storage's owner keeps the memory
  }
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(column.data<float>()[0], 2.0f);
  EXPECT_EQ(column.data<float>()[3], 5.0f);
  column.data<float>()[3] = 50.0f;  // writes go to the owner's memory
  EXPECT_EQ((*watch.lock())[4], 50.0f);
  EXPECT_EQ(memory_stats().allocations, allocations_before);  // the allocator served nothing
  column = Tensor();
  EXPECT_TRUE(watch.expired());  // the last view released the owner
}

TEST(ExternalStorage, RefusesANullOwnerOrNullData) {
  float x = 0;
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Storage(&x, sizeof x, Device::cpu(), nullptr); }),
                           {"owner is null"}));
  auto owner = std::make_shared<int>(0);
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { Storage(nullptr, 4, Device::cpu(), owner); }),
                           {"data is null", "4 bytes"}));
  EXPECT_NO_THROW(Storage(nullptr, 0, Device::cpu(), owner));  // an empty array's buffer
  EXPECT_FALSE(Storage(16, Device::cpu()).external());
}

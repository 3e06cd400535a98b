// Devices by name, as PyTorch's torch.device("cuda:1") and t.to("cpu") (issue 46).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "loom/core/device.h"
#include "loom/core/dtype.h"
#include "loom/core/error.h"
#include "loom/core/storage.h"
#include "loom/core/tensor.h"
#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;

namespace {

Tensor three_floats() {
  auto storage = std::make_shared<Storage>(3 * sizeof(float), Device::cpu());
  Tensor t(storage, {3}, {1}, 0, DType::Float32);
  for (int i = 0; i < 3; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST(Device, ParsesTorchNames) {
  EXPECT_EQ(Device("cpu"), Device::cpu());
  EXPECT_EQ(Device("cpu:0"), Device::cpu());
  EXPECT_EQ(Device("cuda"), Device::cuda(0));
  EXPECT_EQ(Device("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device("cuda:12").index, 12);
  EXPECT_EQ(Device(Device::cuda(3).str()), Device::cuda(3));  // str() reads back
}

TEST(Device, UnknownNamesListTheValidOnes) {
  for (const std::string bad : {"gpu", "CPU", "", "cpu:", "cuda:-1", "cuda:x", "cuda:1:2", "cuda:1234567890", " cpu"}) {
    const std::string msg = error_message<DeviceError>([&] { Device d(bad); });
    EXPECT_TRUE(contains_all(msg, {"Device: '" + bad + "'", "\"cpu\"", "\"cuda\"", "\"cuda:1\""})) << bad << ": " << msg;
  }
}

TEST(Device, TensorToByName) {
  Tensor t = three_floats();
  Tensor same = t.to("cpu");  // nothing to copy: the same tensor
  EXPECT_TRUE(same.shares_storage_with(t));
  EXPECT_EQ(same.device(), Device::cpu());
  EXPECT_TRUE(t.to(std::string("cpu:0")).shares_storage_with(t));
  // "cuda" parses, and the unavailable device is refused as Device::cuda() is
  const std::string by_name = error_message<DeviceError>([&] { t.to("cuda"); });
  const std::string by_value = error_message<DeviceError>([&] { t.to(Device::cuda()); });
  EXPECT_EQ(by_name, by_value);
  EXPECT_TRUE(contains_all(by_name, {"cuda:0", "not available"})) << by_name;
  EXPECT_TRUE(contains_all(error_message<DeviceError>([&] { t.to("tpu"); }), {"'tpu'", "valid"}));
}

#include "fuzz/fuzz_common.h"

#include <sys/mman.h>
#include <unistd.h>

#include <loom/train/losses.h>
#include <loom/train/optimizers.h>

namespace loom_fuzz {

void init() { loom::set_num_threads(1); }

Request split_request(const uint8_t* data, size_t size) {
  static const char* const methods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"};
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t eol = rest.find('\n');
  return {methods[data[0] % 6], rest.substr(0, eol), eol == std::string::npos ? "" : rest.substr(eol + 1)};
}

MemFile::MemFile(const uint8_t* data, size_t size) {
  fd_ = memfd_create("loom_fuzz", MFD_CLOEXEC);
  if (fd_ < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd_, data + done, size - done);
    if (n <= 0) {
      std::perror("write to memfd");
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemFile::~MemFile() { ::close(fd_); }

loom::train::Model make_model(const Net& net) {
  std::vector<loom::Tensor> params;
  for (const auto& l : net.graph.nodes())
    for (const loom::Tensor& p : l.parameters()) params.push_back(p);
  return loom::train::Model(
      net.graph, [](const loom::Tensor& p, const loom::Tensor& t) { return loom::cross_entropy(p, t); },
      std::make_shared<loom::train::Adam>(params, loom::train::AdamOptions{.lr = 0.01}));
}

std::shared_ptr<loom::data::TensorDataset> toy_data() {
  loom::Generator g(3);
  loom::Tensor x = loom::normal({24, 4}, 0, 1, loom::Float32, loom::Device::cpu(), &g);
  loom::Tensor y = loom::randint(0, 3, {24}, loom::Int64, loom::Device::cpu(), &g);
  return std::make_shared<loom::data::TensorDataset>(std::vector<loom::Tensor>{x, y});
}

}  // namespace loom_fuzz

// libFuzzer calls this once before the first input (a weak symbol: the seed writer ignores it).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  loom_fuzz::init();
  return 0;
}

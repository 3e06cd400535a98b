// Training checkpoints: train::Model::load_checkpoint (weights through io::load_state, then the
// optimizer state, generator, history and loader position from the metadata) into a fixed model
// (loom_fuzz::Net with Adam, whose checkpoints are the seeds).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loom_fuzz::Net net;
  static loom::train::Model model = loom_fuzz::make_model(net);
  static loom::data::DataLoader loader(loom_fuzz::toy_data(), {.batch_size = 8});
  const loom_fuzz::MemFile file(data, size);
  loom_fuzz::expect_loom_errors("checkpoint", [&] { model.load_checkpoint(file.path(), &loader); });
  return 0;
}

// Text: data::Vocabulary::from_file, Vocabulary::load and tokenize_file on the bytes as a file
// (plain or gzip). Byte 0 picks the options, the rest is the file:
//   bits 0-1 min_count - 1; bits 2-3 max_size (0: none, else 3 + 2 * value); bit 4 add_eos
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  loom::data::VocabularyOptions o;
  o.min_count = 1 + (data[0] & 3);
  const int64_t m = (data[0] >> 2) & 3;
  o.max_size = m ? 3 + 2 * m : 0;
  const bool add_eos = (data[0] >> 4) & 1;
  const loom_fuzz::MemFile file(data + 1, size - 1);
  loom::data::Vocabulary vocab;
  loom_fuzz::expect_loom_errors("text", [&] { vocab = loom::data::Vocabulary::from_file(file.path(), o); });
  loom_fuzz::expect_loom_errors("text", [&] { loom::data::Vocabulary::load(file.path()); });
  loom_fuzz::expect_loom_errors("text", [&] { loom::data::tokenize_file(file.path(), vocab, add_eos); });
  return 0;
}

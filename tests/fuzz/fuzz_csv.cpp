// CSV: data::read_csv and read_csv_header on the bytes as a file (plain or gzip). The first two
// bytes pick the options, the rest is the file:
//   byte 0: the delimiter, one of , ; TAB | space
//   byte 1: bit 0 header; bits 1-3 dtype (float32, float64, int32, int64, uint8, bool);
//           bits 4-5 skip_rows; bits 6-7 columns: all, {0, -1}, {-2}, names {"a", "b"}
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char kDelims[] = {',', ';', '\t', '|', ' '};
  static const loom::DType kTypes[] = {loom::Float32, loom::Float64, loom::Int32, loom::Int64, loom::UInt8, loom::Bool};
  loom::data::CsvOptions o;
  o.delimiter = kDelims[data[0] % 5];
  o.header = data[1] & 1;
  o.dtype = kTypes[((data[1] >> 1) & 7) % 6];
  o.skip_rows = (data[1] >> 4) & 3;
  switch (data[1] >> 6) {
    case 1: o.columns = {0, -1}; break;
    case 2: o.columns = {-2}; break;
    case 3: o.names = {"a", "b"}; break;
    default: break;
  }
  const loom_fuzz::MemFile file(data + 2, size - 2);
  loom_fuzz::expect_loom_errors("csv", [&] { loom::data::read_csv(file.path(), o); });
  loom_fuzz::expect_loom_errors("csv", [&] { loom::data::read_csv_header(file.path(), o); });
  return 0;
}

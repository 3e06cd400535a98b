#pragma once
// Numeric CSV (or TSV, ...) files into a 2-D tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/core/tensor.h"

namespace loom::data {

struct LOOM_API CsvOptions {
  char delimiter = ',';
  bool header = true;                 // the first line (after skip_rows) names the columns
  int64_t skip_rows = 0;              // lines skipped before the header / data
  std::vector<int64_t> columns;       // columns to keep by position (negative counts from the end)
  std::vector<std::string> names;     // or by header name (needs header); empty both: all columns
  DType dtype = Float32;              // float dtypes parse "nan"/"inf"; integer dtypes need integers
};

// Reads `path` (plain or gzip) into a (rows, columns) tensor of options.dtype. Fields are
// trimmed of spaces; a field may be double-quoted ("" is a quote inside); blank lines are
// skipped; CRLF line ends are accepted. Throws IOError naming the file, the line and the column
// (1-based) of the first field that is missing, empty or not a number of the dtype.
LOOM_API Tensor read_csv(const std::string& path, const CsvOptions& options = {});

// The header's column names (all of them, in file order).
LOOM_API std::vector<std::string> read_csv_header(const std::string& path, const CsvOptions& options = {});

}  // namespace loom::data

#include "loom/data/csv.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "data/gz_file.h"
#include "loom/ops/creation.h"

namespace loom::data {

namespace {

struct Fail {
  const std::string& path;
  [[noreturn]] void operator()(int64_t line, int64_t column, const std::string& what) const {
    std::string where = "read_csv: '" + path + "'";
    if (line > 0) where += " line " + std::to_string(line);
    if (column > 0) where += ", column " + std::to_string(column);
    throw IOError(where + ": " + what);
  }
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

// Splits one line into fields; quotes group delimiters and "" stands for one quote.
std::vector<std::string> split(std::string_view line, char delim, int64_t line_no, const Fail& fail) {
  std::vector<std::string> out;
  std::string field;
  size_t i = 0;
  for (;;) {
    // skip leading blanks, then a quoted or plain field
    size_t j = i;
    while (j < line.size() && (line[j] == ' ' || line[j] == '\t') && line[j] != delim) ++j;
    if (j < line.size() && line[j] == '"') {
      field.clear();
      size_t k = j + 1;
      for (;;) {
        if (k >= line.size()) fail(line_no, static_cast<int64_t>(out.size()) + 1, "unterminated quoted field");
        if (line[k] == '"') {
          if (k + 1 < line.size() && line[k + 1] == '"') {
            field += '"';
            k += 2;
            continue;
          }
          ++k;
          break;
        }
        field += line[k++];
      }
      while (k < line.size() && (line[k] == ' ' || line[k] == '\t') && line[k] != delim) ++k;
      if (k < line.size() && line[k] != delim)
        fail(line_no, static_cast<int64_t>(out.size()) + 1, "characters after a closing quote");
      out.push_back(field);
      if (k >= line.size()) break;
      i = k + 1;
    } else {
      const size_t k = line.find(delim, i);
      out.push_back(trim(line.substr(i, k == std::string_view::npos ? std::string_view::npos : k - i)));
      if (k == std::string_view::npos) break;
      i = k + 1;
    }
  }
  return out;
}

struct Lines {
  const std::string& text;
  size_t pos = 0;
  int64_t line_no = 0;
  // The next line without its end; false at the end of the text.
  bool next(std::string_view& line) {
    if (pos >= text.size()) return false;
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    line = std::string_view(text).substr(pos, e - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = e + 1;
    ++line_no;
    return true;
  }
};

bool blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t') return false;
  return true;
}

struct Parsed {
  std::string text;
  std::vector<std::string> header;
  size_t data_pos = 0;
  int64_t data_line = 0;
};

Parsed open(const std::string& path, const CsvOptions& o) {
  const Fail fail{path};
  if (o.skip_rows < 0) throw ValueError("read_csv: skip_rows must be >= 0, got " + std::to_string(o.skip_rows));
  if (o.delimiter == '"' || o.delimiter == '\n' || o.delimiter == '\r')
    throw ValueError(std::string("read_csv: the delimiter cannot be '") + (o.delimiter == '"' ? "\"" : "a line end") + "'");
  Parsed p;
  p.text = detail::read_maybe_gzip(path, "read_csv");
  Lines lines{p.text};
  std::string_view line;
  for (int64_t i = 0; i < o.skip_rows; ++i)
    if (!lines.next(line)) fail(0, 0, "the file has fewer than skip_rows=" + std::to_string(o.skip_rows) + " lines");
  if (o.header) {
    bool found = false;
    while (lines.next(line))
      if (!blank(line)) {
        found = true;
        break;
      }
    if (!found) fail(0, 0, "the file has no header line");
    p.header = split(line, o.delimiter, lines.line_no, fail);
  }
  p.data_pos = lines.pos;
  p.data_line = lines.line_no;
  return p;
}

// The 0-based fields of a row of `width` fields that read_csv keeps: by header name, by index
// (negative from the end), or all.
std::vector<int64_t> kept_fields(const CsvOptions& o, const std::vector<std::string>& header, int64_t width, int64_t line_no,
                                 const Fail& fail) {
  std::vector<int64_t> keep;
  if (!o.names.empty()) {
    for (const std::string& name : o.names) {
      int64_t at = -1;
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) at = static_cast<int64_t>(i);
      if (at < 0) {
        std::string all;
        for (const auto& h : header) all += (all.empty() ? "" : ", ") + h;
        fail(line_no, 0, "no column named '" + name + "' in the header (columns: " + all + ")");
      }
      keep.push_back(at);
    }
  } else if (!o.columns.empty()) {
    for (int64_t c : o.columns) {
      const int64_t at = c < 0 ? c + width : c;
      if (at < 0 || at >= width)
        fail(line_no, 0, "column " + std::to_string(c) + " does not exist in rows of " + std::to_string(width) + " fields");
      keep.push_back(at);
    }
  } else {
    for (int64_t i = 0; i < width; ++i) keep.push_back(i);
  }
  return keep;
}

// A floating field, as float64; a finite value float32 cannot hold is refused when reading float32.
double parse_float(const std::string& f, const char* b, const char* e, DType dtype, int64_t line_no, int64_t col, const Fail& fail) {
  double v;
  const auto r = std::from_chars(b, e, v);
  if (r.ec == std::errc::result_out_of_range) fail(line_no, col, "'" + f + "' is out of the range of float64");
  if (r.ec != std::errc() || r.ptr != e) fail(line_no, col, "'" + f + "' is not a number");
  // A finite value that float32 rounds to infinity (|v| >= 2^128 - 2^103, halfway past its
  // largest value) would turn into inf silently; an explicit inf stays inf.
  if (dtype == Float32 && std::isfinite(v) && std::fabs(v) >= std::ldexp(1.0, 128) - std::ldexp(1.0, 103))
    fail(line_no, col, "'" + f + "' is out of the range of float32 (valid: magnitudes up to 3.4028234663852886e+38)");
  return v;
}

// A boolean field: 0, 1, true, false (or True, TRUE, ...).
int64_t parse_bool(const std::string& f, const char* b, const char* e, int64_t line_no, int64_t col, const Fail& fail) {
  if (f == "true" || f == "True" || f == "TRUE") return 1;
  if (f == "false" || f == "False" || f == "FALSE") return 0;
  int64_t v;
  const auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || r.ptr != e || (v != 0 && v != 1))
    fail(line_no, col, "'" + f + "' is not a boolean (valid: 0, 1, true, false)");
  return v;
}

// An integer field, in the range of `dtype` (int64, int32 or uint8).
int64_t parse_int(const std::string& f, const char* b, const char* e, DType dtype, int64_t line_no, int64_t col, const Fail& fail) {
  int64_t v;
  const auto r = std::from_chars(b, e, v);
  if (r.ec == std::errc::result_out_of_range)
    fail(line_no, col, "'" + f + "' is out of the range of int64 (valid: -9223372036854775808 to 9223372036854775807)");
  if (r.ec != std::errc() || r.ptr != e) fail(line_no, col, "'" + f + "' is not an integer (dtype " + dtype_name(dtype) + ")");
  const bool fits = dtype == Int64 ||
                    (dtype == Int32 && v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) ||
                    (dtype == UInt8 && v >= 0 && v <= 255);
  if (!fits)
    fail(line_no, col,
         "'" + f + "' is out of the range of " + dtype_name(dtype) + (dtype == Int32 ? " (valid: -2147483648 to 2147483647)" : " (valid: 0 to 255)"));
  return v;
}

// The kept fields of one row, parsed as `dtype` and appended to `fvals` (floating) or `ivals`.
void parse_row(const std::vector<std::string>& fields, const std::vector<int64_t>& keep, DType dtype, int64_t line_no, const Fail& fail,
               std::vector<double>& fvals, std::vector<int64_t>& ivals) {
  for (int64_t at : keep) {
    const std::string& f = fields[static_cast<size_t>(at)];
    const int64_t col = at + 1;
    if (f.empty()) fail(line_no, col, "the field is empty (missing value)");
    const char* b = f.data();
    const char* e = f.data() + f.size();
    if (*b == '+' && e - b > 1 && b[1] != '-') ++b;
    if (is_floating(dtype)) fvals.push_back(parse_float(f, b, e, dtype, line_no, col, fail));
    else if (dtype == Bool) ivals.push_back(parse_bool(f, b, e, line_no, col, fail));
    else ivals.push_back(parse_int(f, b, e, dtype, line_no, col, fail));
  }
}

}  // namespace

std::vector<std::string> read_csv_header(const std::string& path, const CsvOptions& options) {
  CsvOptions o = options;
  o.header = true;
  return open(path, o).header;
}

Tensor read_csv(const std::string& path, const CsvOptions& o) {
  const Fail fail{path};
  if (!o.columns.empty() && !o.names.empty()) throw ValueError("read_csv: give columns or names, not both");
  if (!o.names.empty() && !o.header) throw ValueError("read_csv: selecting columns by name needs header = true");
  if (o.dtype == Float16 || o.dtype == BFloat16)
    throw DTypeError(std::string("read_csv: dtype ") + dtype_name(o.dtype) + " is a storage type (read float32 and convert)");
  Parsed p = open(path, o);
  Lines lines{p.text, p.data_pos, p.data_line};
  int64_t width = o.header ? static_cast<int64_t>(p.header.size()) : -1;  // fields per line
  std::vector<int64_t> keep;  // 0-based field positions
  if (o.header) keep = kept_fields(o, p.header, width, p.data_line, fail);
  std::vector<double> fvals;
  std::vector<int64_t> ivals;
  int64_t rows = 0;
  std::string_view line;
  while (lines.next(line)) {
    if (blank(line)) continue;
    const std::vector<std::string> fields = split(line, o.delimiter, lines.line_no, fail);
    const int64_t n = static_cast<int64_t>(fields.size());
    if (width < 0) {  // no header: the first row sets the width
      width = n;
      keep = kept_fields(o, p.header, width, lines.line_no, fail);
    }
    if (n != width)
      fail(lines.line_no, 0,
           "the line has " + std::to_string(n) + " fields but " + (o.header ? std::string("the header has ") : std::string("the first row has ")) +
               std::to_string(width));
    parse_row(fields, keep, o.dtype, lines.line_no, fail, fvals, ivals);
    ++rows;
  }
  const Shape shape{rows, static_cast<int64_t>(keep.size())};
  if (is_floating(o.dtype)) {
    Tensor t = from_vector(fvals, shape, Device::cpu());
    return o.dtype == Float64 ? t : t.astype(o.dtype);
  }
  Tensor t = from_vector(ivals, shape, Device::cpu());
  return o.dtype == Int64 ? t : t.astype(o.dtype);
}

}  // namespace loom::data

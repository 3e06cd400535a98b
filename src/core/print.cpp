// NumPy-like text for tensors: "tensor([[1., 2.], [3., 4.]], dtype=float32)", with the middle
// of each axis elided ("...") when the tensor has more than 1000 elements.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "loom/core/tensor.h"

namespace loom {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  DType dtype;
  bool all_integral = true;
  bool use_exp = false;
  int width = 1;

  std::string fmt(double v) const {
    char buf[64];
    if (dtype == DType::Bool) return v != 0 ? "true" : "false";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if (std::isnan(v)) {
      return "nan";
    } else if (std::isinf(v)) {
      return v > 0 ? "inf" : "-inf";
    } else if (use_exp) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (all_integral) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
};

bool shown(int64_t i, int64_t n, bool elide) { return !elide || n <= 2 * kEdgeItems || i < kEdgeItems || i >= n - kEdgeItems; }

void collect(const Tensor& t, std::vector<int64_t>& idx, size_t axis, bool elide, std::vector<double>& out) {
  if (axis == idx.size()) {
    out.push_back(t.at(idx));
    return;
  }
  const int64_t n = t.shape()[axis];
  for (int64_t i = 0; i < n; ++i) {
    if (!shown(i, n, elide)) continue;
    idx[axis] = i;
    collect(t, idx, axis + 1, elide, out);
  }
}

void emit(const Tensor& t, const Formatter& f, std::vector<int64_t>& idx, size_t axis, bool elide, int indent,
          std::ostringstream& os) {
  if (axis == idx.size()) {
    std::string s = f.fmt(t.at(idx));
    os << std::string(static_cast<size_t>(std::max<int>(0, f.width - static_cast<int>(s.size()))), ' ') << s;
    return;
  }
  const int64_t n = t.shape()[axis];
  os << '[';
  bool first = true;
  bool skipped = false;
  for (int64_t i = 0; i < n; ++i) {
    if (!shown(i, n, elide)) {
      if (!skipped) {
        // the elided block is separated like any other block (blank lines between 3-d blocks)
        if (axis + 1 == idx.size())
          os << ", ...";
        else
          os << ',' << std::string(idx.size() - axis - 1, '\n') << std::string(indent + axis + 1, ' ') << "...";
        skipped = true;
      }
      continue;
    }
    if (!first) {
      if (axis + 1 == idx.size()) {
        os << ", ";
      } else {
        os << ',' << std::string(idx.size() - axis - 1, '\n') << std::string(indent + axis + 1, ' ');
      }
    }
    first = false;
    idx[axis] = i;
    emit(t, f, idx, axis + 1, elide, indent, os);
  }
  os << ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  const std::string prefix = "tensor(";
  os << prefix;
  if (device().type != DeviceType::CPU) {
    os << "<" << shape_str(shape()) << " on " << device().str() << ">";
  } else if (numel() == 0) {
    os << "[]";
  } else {
    const bool elide = numel() > kThreshold;
    Formatter f{dtype()};
    std::vector<int64_t> idx(shape().size(), 0);
    std::vector<double> values;
    collect(*this, idx, 0, elide, values);
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::floor(v)) f.all_integral = false;
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    f.use_exp = is_floating(dtype()) && (max_abs >= 1e8 || (!f.all_integral && min_abs < 1e-4));
    for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.fmt(v).size()));
    emit(*this, f, idx, 0, elide, static_cast<int>(prefix.size()), os);
  }
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool)
    os << ", dtype=" << dtype_name(dtype());
  if (numel() == 0) os << ", shape=" << shape_str(shape());
  if (requires_grad()) os << ", requires_grad=true";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace loom

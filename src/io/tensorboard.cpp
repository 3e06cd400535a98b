#include "loom/io/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <system_error>

#include "../core/utf8.h"
#include "crc32c.h"
#include "loom/core/error.h"

namespace loom::io {
namespace {

namespace pbio = google::protobuf::io;

// Protocol buffer wire types and the field numbers of TensorBoard's Event, Summary,
// Summary.Value and HistogramProto messages.
enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
constexpr uint32_t tag(uint32_t field, Wire wire) { return field << 3 | wire; }

struct Encoder {
  std::string bytes;
  void fixed64(uint32_t field, double v) {
    with([&](pbio::CodedOutputStream& c) {
      c.WriteTag(tag(field, kFixed64));
      c.WriteLittleEndian64(std::bit_cast<uint64_t>(v));
    });
  }
  void fixed32(uint32_t field, float v) {
    with([&](pbio::CodedOutputStream& c) {
      c.WriteTag(tag(field, kFixed32));
      c.WriteLittleEndian32(std::bit_cast<uint32_t>(v));
    });
  }
  void varint(uint32_t field, int64_t v) {
    with([&](pbio::CodedOutputStream& c) {
      c.WriteTag(tag(field, kVarint));
      c.WriteVarint64(static_cast<uint64_t>(v));
    });
  }
  // A string, an embedded message or a packed repeated field: all are length-delimited.
  void delimited(uint32_t field, const std::string& v) {
    with([&](pbio::CodedOutputStream& c) {
      c.WriteTag(tag(field, kBytes));
      c.WriteVarint64(v.size());
      c.WriteRaw(v.data(), static_cast<int>(v.size()));
    });
  }
  void packed_doubles(uint32_t field, const std::vector<double>& v) {
    std::string raw;
    raw.reserve(v.size() * 8);
    for (double d : v) {
      const uint64_t u = std::bit_cast<uint64_t>(d);
      for (int k = 0; k < 8; ++k) raw.push_back(static_cast<char>(u >> (8 * k) & 0xFF));
    }
    delimited(field, raw);
  }

 private:
  template <typename F> void with(F&& f) {
    pbio::StringOutputStream out(&bytes);
    pbio::CodedOutputStream c(&out);
    f(c);
  }
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One record of the framing TensorBoard reads: length, its masked CRC, data, their masked CRC.
std::string frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  const uint64_t n = data.size();
  std::string len(8, '\0');
  for (int k = 0; k < 8; ++k) len[k] = static_cast<char>(n >> (8 * k) & 0xFF);
  auto put32 = [&](uint32_t v) { for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>(v >> (8 * k) & 0xFF)); };
  out += len;
  put32(detail::masked_crc32c(len));
  out += data;
  put32(detail::masked_crc32c(data));
  return out;
}

std::string event(double wall_time, int64_t step, uint32_t field, const std::string& payload) {
  Encoder e;
  e.fixed64(1, wall_time);
  e.varint(2, step);
  e.delimited(field, payload);
  return e.bytes;
}

std::string summary_value(const std::string& tag_name, const std::function<void(Encoder&)>& value) {
  Encoder v;
  v.delimited(1, tag_name);
  value(v);
  Encoder summary;
  summary.delimited(1, v.bytes);
  return summary.bytes;
}

void check_tag(const std::string& tag_name) {
  if (tag_name.empty()) throw ValueError("SummaryWriter: a tag must not be empty");
  if (!detail::is_utf8(tag_name)) throw ValueError("SummaryWriter: the tag " + detail::quote_text(tag_name) + " is not UTF-8");
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  std::string h(host);
  for (char& c : h)
    if (c == '/') c = '_';
  return h;
}

std::atomic<int64_t> files_opened{0};

}  // namespace

struct SummaryWriter::Impl {
  std::string path;
  int fd = -1;
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
  void write(const std::string& record) {
    size_t done = 0;
    while (done < record.size()) {
      const ssize_t w = ::write(fd, record.data() + done, record.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw IOError("SummaryWriter: writing " + path + " failed: " + std::strerror(errno));
      done += static_cast<size_t>(w);
    }
  }
};

SummaryWriter::SummaryWriter(const std::string& log_dir) : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw IOError("SummaryWriter: cannot create the folder " + log_dir + ": " + ec.message());
  const auto seconds = static_cast<int64_t>(now_seconds());
  impl_->path = (std::filesystem::path(log_dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." +
                                                    std::to_string(::getpid()) + "." + std::to_string(files_opened++)))
                    .string();
  impl_->fd = ::open(impl_->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (impl_->fd < 0) throw IOError("SummaryWriter: cannot create " + impl_->path + ": " + std::strerror(errno));
  Encoder version;
  version.fixed64(1, now_seconds());
  version.delimited(3, "brain.Event:2");
  impl_->write(frame(version.bytes));
}

SummaryWriter::SummaryWriter(SummaryWriter&&) noexcept = default;
SummaryWriter& SummaryWriter::operator=(SummaryWriter&&) noexcept = default;
SummaryWriter::~SummaryWriter() = default;

const std::string& SummaryWriter::path() const { return impl_->path; }

void SummaryWriter::flush() {
  // Records go straight to the operating system with write(2); nothing is buffered here.
}

void SummaryWriter::add_scalar(const std::string& tag_name, double value, int64_t step, double wall_time) {
  check_tag(tag_name);
  const std::string s = summary_value(tag_name, [&](Encoder& v) { v.fixed32(2, static_cast<float>(value)); });
  impl_->write(frame(event(wall_time > 0 ? wall_time : now_seconds(), step, 5, s)));
}

void SummaryWriter::add_histogram(const std::string& tag_name, const Tensor& values, int64_t step, double wall_time,
                                  int64_t bins) {
  if (!values.defined()) throw ValueError("SummaryWriter::add_histogram: the tensor for " + detail::quote_text(tag_name) + " is undefined");
  add_histogram(tag_name, values.astype(DType::Float64).to_vector<double>(), step, wall_time, bins);
}

void SummaryWriter::add_histogram(const std::string& tag_name, const std::vector<double>& values, int64_t step,
                                  double wall_time, int64_t bins) {
  check_tag(tag_name);
  if (bins < 1 || bins > 10000)
    throw ValueError("SummaryWriter::add_histogram: bins must be 1 to 10000, not " + std::to_string(bins));
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sum_sq = 0, num = 0;
  for (double x : values) {
    if (!std::isfinite(x)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    sum_sq += x * x;
    ++num;
  }
  if (num == 0)
    throw ValueError("SummaryWriter::add_histogram: " + detail::quote_text(tag_name) +
                     " has no finite value (NaNs and infinities are skipped)");
  // Bucket i holds (limit[i-1], limit[i]] (the first from -infinity): equal widths from lo to hi.
  const int64_t n = hi > lo ? bins : 1;
  const double width = (hi - lo) / static_cast<double>(n);
  std::vector<double> limits(static_cast<size_t>(n)), counts(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) limits[static_cast<size_t>(i)] = i + 1 == n ? hi : lo + width * static_cast<double>(i + 1);
  for (double x : values) {
    if (!std::isfinite(x)) continue;
    int64_t i = width > 0 ? static_cast<int64_t>(std::ceil((x - lo) / width)) - 1 : 0;
    i = std::clamp<int64_t>(i, 0, n - 1);
    while (i > 0 && x <= limits[static_cast<size_t>(i - 1)]) --i;  // rounding at an edge
    while (i + 1 < n && x > limits[static_cast<size_t>(i)]) ++i;
    counts[static_cast<size_t>(i)] += 1;
  }
  Encoder h;
  h.fixed64(1, lo);
  h.fixed64(2, hi);
  h.fixed64(3, num);
  h.fixed64(4, sum);
  h.fixed64(5, sum_sq);
  h.packed_doubles(6, limits);
  h.packed_doubles(7, counts);
  const std::string s = summary_value(tag_name, [&](Encoder& v) { v.delimited(5, h.bytes); });
  impl_->write(frame(event(wall_time > 0 ? wall_time : now_seconds(), step, 5, s)));
}

}  // namespace loom::io

// The C++ half of tests/io/check_safetensors.py.
//   loom_io_pycheck write DIR   writes DIR/loom.safetensors (every dtype, 0-d and empty tensors,
//                               metadata) for the Python reader to check
//   loom_io_pycheck read DIR    loads DIR/python.safetensors, written by the Python writer, and
//                               checks it holds the same tensors and metadata
// The values come from the formulas below, mirrored in check_safetensors.py.
#include <loom/loom.h>

#include <cmath>
#include <iostream>

using namespace loom;

namespace {

io::TensorMap expected() {
  io::TensorMap t;
  std::vector<float> f32(12);
  for (int i = 0; i < 12; ++i) f32[i] = static_cast<float>(((i * 37) % 101 - 50) / 8.0 + i / 1024.0);
  t["f32"] = from_vector(f32, {3, 4});
  t["f32_t"] = t["f32"].transpose();  // written from a non-contiguous view
  std::vector<double> f64(12);
  for (int i = 0; i < 12; ++i) f64[i] = (i - 5) / 3.0;
  t["f64"] = from_vector(f64, {2, 3, 2});
  const float inf = INFINITY, nan = NAN;
  t["f16"] = from_vector<float>({-1.5f, -0.0f, 0.375f, 65504.0f, inf, -inf, nan, std::ldexp(1.0f, -24)}, {8}).astype(Float16);
  t["bf16"] = from_vector<float>({1.0f, -2.5f, 3.140625f, std::ldexp(1.0f, 100), -std::ldexp(1.0f, -100), 0.0f,
                                  std::ldexp(1.0f, -130), nan}, {2, 4}).astype(BFloat16);
  t["i32"] = from_vector<int32_t>({INT32_MIN, -1, 0, INT32_MAX, 123456789}, {5});
  t["i64"] = from_vector<int64_t>({INT64_MIN, -1, (int64_t{1} << 53) + 1, INT64_MAX}, {2, 2});
  std::vector<uint8_t> u8(256);
  for (int i = 0; i < 256; ++i) u8[i] = static_cast<uint8_t>(i);
  t["u8"] = from_vector(u8, {16, 16});
  t["bool"] = from_vector<bool>({true, false, false, true, false, false, true}, {7});
  t["bool_2d"] = from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  t["scalar"] = scalar_tensor(42.5, Float32);
  t["scalar_i64"] = scalar_tensor(int64_t{-7}, Int64);
  t["empty_f32"] = zeros({0}, Float32);
  t["empty_i64"] = zeros({2, 0, 3}, Int64);
  t["empty_bf16"] = zeros({0}, BFloat16);
  return t;
}

const io::Metadata kMetadata = {{"author", "loom"}, {"unicode", "\xc5\xbc\xc3\xb3\xc5\x82w \xe2\x9c\x93"}, {"empty", ""},
                                {"json", "{\"a\": [1, 2]}"}};

// Equal values (bitwise for integers; for floats equal with the same sign, or both NaN).
bool same(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (!is_floating(a.dtype())) return a.to_vector<int64_t>() == b.to_vector<int64_t>();
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i])) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: loom_io_pycheck write|read DIR\n";
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  if (mode == "write") {
    io::save_safetensors(dir + "/loom.safetensors", expected(), kMetadata);
    std::cout << "wrote " << dir << "/loom.safetensors\n";
    return 0;
  }
  io::Metadata meta;
  const io::TensorMap got = io::load_safetensors(dir + "/python.safetensors", &meta);
  const io::TensorMap want = expected();
  int failures = 0;
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      std::cerr << "missing tensor '" << name << "'\n";
      ++failures;
    } else if (!same(it->second, t)) {
      std::cerr << "tensor '" << name << "' differs: got " << dtype_name(it->second.dtype()) << " " << shape_str(it->second.shape())
                << "\n" << it->second << "\nwant " << dtype_name(t.dtype()) << " " << shape_str(t.shape()) << "\n" << t << "\n";
      ++failures;
    }
  }
  if (got.size() != want.size()) {
    std::cerr << "python.safetensors holds " << got.size() << " tensors, expected " << want.size() << "\n";
    ++failures;
  }
  if (meta != kMetadata) {
    std::cerr << "metadata differs\n";
    ++failures;
  }
  if (failures) return 1;
  std::cout << "Loom read python.safetensors: " << got.size() << " tensors and the metadata match\n";
  return 0;
}

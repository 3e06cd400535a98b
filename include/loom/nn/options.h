#pragma once
// A layer's options: a JSON object written by the layer (LayerImpl::options) and read back by
// its registered factory (nn/registry.h) when a saved graph is loaded. Getters check type and
// range and throw ValueError naming the layer, the field and what would be valid.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::nn {

class LOOM_API Options {
 public:
  Options();
  ~Options();
  Options(const Options& o);
  Options& operator=(const Options& o);
  Options(Options&&) noexcept;
  Options& operator=(Options&&) noexcept;

  Options& set_int(const std::string& key, int64_t v);
  Options& set_uint(const std::string& key, uint64_t v);
  Options& set_float(const std::string& key, double v);  // NaN and infinities too
  Options& set_bool(const std::string& key, bool v);
  Options& set_string(const std::string& key, const std::string& v);
  Options& set_ints(const std::string& key, const std::vector<int64_t>& v);
  Options& set_object(const std::string& key, const Options& v);

  bool has(const std::string& key) const;
  bool is_string(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  Options get_object(const std::string& key) const;

  // The JSON text, and options read from JSON text (`where` prefixes error messages).
  std::string to_json() const;
  static Options from_json(const std::string& text, const std::string& where = "Options");
  // The prefix of error messages, e.g. "graph_from_json: layer 'dense_1'".
  const std::string& where() const;
  [[noreturn]] void fail(const std::string& what) const;  // throws ValueError(where() + " " + what)

  struct Impl;
  const Impl& impl() const { return *impl_; }
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::nn

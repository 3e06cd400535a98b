#pragma once
// The pieces of a NumPy index expression: t.index({0, Slice(1, None, 2), Ellipsis, NewAxis, ids}).
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <variant>

#include "loom/core/api.h"

namespace loom {

class Tensor;

struct NoneType {};
inline constexpr NoneType None{};

// start:stop:step with Python's meaning: missing bounds, negative positions, negative steps.
struct LOOM_API Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice() = default;
  Slice(std::optional<int64_t> start_, std::optional<int64_t> stop_ = std::nullopt, int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
  Slice(NoneType, std::optional<int64_t> stop_ = std::nullopt, int64_t step_ = 1) : stop(stop_), step(step_) {}
  Slice(std::optional<int64_t> start_, NoneType, int64_t step_ = 1) : start(start_), step(step_) {}
  Slice(NoneType, NoneType, int64_t step_ = 1) : step(step_) {}
};

struct EllipsisType {};
inline constexpr EllipsisType Ellipsis{};
struct NewAxisType {};
inline constexpr NewAxisType NewAxis{};

class LOOM_API TensorIndex {
 public:
  TensorIndex(int64_t i) : v_(i) {}
  TensorIndex(int i) : v_(static_cast<int64_t>(i)) {}
  // NumPy's x[True] / x[False]: a new axis of size 1 / 0 (as a 0-d boolean tensor would);
  // without it a bool would convert to the integer 1 / 0
  TensorIndex(bool b) : v_(b) {}
  TensorIndex(Slice s) : v_(s) {}
  TensorIndex(EllipsisType) : v_(EllipsisType{}) {}
  TensorIndex(NewAxisType) : v_(NewAxisType{}) {}
  TensorIndex(NoneType) : v_(NewAxisType{}) {}  // NumPy's None inserts an axis
  TensorIndex(const Tensor& t);                  // integer array or boolean mask

  bool is_int() const { return v_.index() == 0; }
  bool is_slice() const { return v_.index() == 1; }
  bool is_ellipsis() const { return v_.index() == 2; }
  bool is_newaxis() const { return v_.index() == 3; }
  bool is_tensor() const { return v_.index() == 4; }
  bool is_bool() const { return v_.index() == 5; }
  int64_t integer() const { return std::get<0>(v_); }
  const Slice& slice() const { return std::get<1>(v_); }
  const Tensor& tensor() const { return *std::get<4>(v_); }
  bool boolean() const { return std::get<5>(v_); }

 private:
  std::variant<int64_t, Slice, EllipsisType, NewAxisType, std::shared_ptr<Tensor>, bool> v_;
};

}  // namespace loom

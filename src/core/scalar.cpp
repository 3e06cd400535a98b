#include "loom/core/scalar.h"

namespace loom {

DType Scalar::natural_dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: return DType::Float32;
  }
  return DType::Float32;
}

DType Scalar::result_dtype_with(DType t) const {
  if (kind_ == Kind::Float && !is_floating(t)) return DType::Float32;
  if (kind_ == Kind::Int && t == DType::Bool) return DType::Int64;
  return t;
}

}  // namespace loom

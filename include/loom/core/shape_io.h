#pragma once
// `os << shape` for Shape (std::vector<int64_t>); a header of its own so that the many files
// including shape.h do not pull in stream declarations.
#include <iosfwd>

#include "loom/core/api.h"
#include "loom/core/shape.h"

namespace loom {

// Writes shape_str(shape), e.g. "(-1, 8)". Shape is std::vector<int64_t>, so argument-dependent
// lookup (which searches namespace std only) cannot find this operator: it is found after
// `using namespace loom;`, with `using loom::operator<<;`, and inside namespace loom. Code in a
// namespace that declares an operator<< of its own (hiding this one) writes
// `os << loom::shape_str(s)`. A distinct Shape type would ripple through every op signature.
LOOM_API std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace loom

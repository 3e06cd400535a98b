#pragma once
// Every error Loom raises derives from loom::Error. Messages name the operation, the operands
// (shapes, dtypes, devices) and what would have been valid.
#include <stdexcept>
#include <string>

#include "loom/core/api.h"

namespace loom {

class LOOM_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class LOOM_API ShapeError : public Error { using Error::Error; };
class LOOM_API DTypeError : public Error { using Error::Error; };
class LOOM_API DeviceError : public Error { using Error::Error; };
class LOOM_API IndexError : public Error { using Error::Error; };
class LOOM_API ValueError : public Error { using Error::Error; };
class LOOM_API OutOfMemoryError : public Error { using Error::Error; };
class LOOM_API AutogradError : public Error { using Error::Error; };
class LOOM_API IOError : public Error { using Error::Error; };

}  // namespace loom

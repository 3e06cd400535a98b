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

class ShapeError : public Error { using Error::Error; };
class DTypeError : public Error { using Error::Error; };
class DeviceError : public Error { using Error::Error; };
class IndexError : public Error { using Error::Error; };
class ValueError : public Error { using Error::Error; };
class OutOfMemoryError : public Error { using Error::Error; };
class AutogradError : public Error { using Error::Error; };
class IOError : public Error { using Error::Error; };

}  // namespace loom

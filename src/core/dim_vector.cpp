#include "loom/core/dim_vector.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace loom {

void DimVector::grow(size_t n) {
  const size_t capacity = std::max(n, 2 * capacity_);
  auto* fresh = new int64_t[capacity];
  std::memcpy(fresh, data_, size_ * sizeof(int64_t));
  if (on_heap()) delete[] data_;
  data_ = fresh;
  capacity_ = capacity;
}

DimVector::iterator DimVector::insert_range(const_iterator pos, const int64_t* values, size_t n) {
  const size_t at = static_cast<size_t>(pos - data_);
  reserve(size_ + n);
  std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(int64_t));
  std::memcpy(data_ + at, values, n * sizeof(int64_t));
  size_ += n;
  return data_ + at;
}

DimVector::iterator DimVector::insert(const_iterator pos, size_t n, int64_t v) {
  const size_t at = static_cast<size_t>(pos - data_);
  reserve(size_ + n);
  std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(int64_t));
  std::fill(data_ + at, data_ + at + n, v);
  size_ += n;
  return data_ + at;
}

DimVector::iterator DimVector::erase(const_iterator first, const_iterator last) {
  const size_t at = static_cast<size_t>(first - data_), n = static_cast<size_t>(last - first);
  std::memmove(data_ + at, data_ + at + n, (size_ - at - n) * sizeof(int64_t));
  size_ -= n;
  return data_ + at;
}

void DimVector::throw_out_of_range(size_t i) const {
  throw std::out_of_range("DimVector::at: index " + std::to_string(i) + " with size " + std::to_string(size_));
}

}  // namespace loom

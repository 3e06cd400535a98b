#pragma once
// DimVector: the vector of int64_t behind Shape and Strides. It keeps up to kInline values in
// the object itself and goes to the heap only beyond that, so a tensor of up to six axes costs
// no allocation for its geometry (the two heap vectors of every new tensor, measured on a
// one-element add: docs/kernels.md, "Per-op overhead"). It has std::vector's
// interface as far as Loom and its users need it, and converts to and from
// std::vector<int64_t> implicitly.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <type_traits>
#include <vector>

#include "loom/core/api.h"

namespace loom {

class LOOM_API DimVector {
 public:
  static constexpr size_t kInline = 6;

  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  DimVector() noexcept {}  // NOLINT: user-provided, so that a const DimVector needs no initializer
  explicit DimVector(size_t n) { resize(n, 0); }
  DimVector(size_t n, int64_t value) { resize(n, value); }
  DimVector(std::initializer_list<int64_t> values) { append(values.begin(), values.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  DimVector(It first, It last) {
    append(first, last);
  }
  DimVector(const std::vector<int64_t>& v) { append(v.data(), v.data() + v.size()); }  // NOLINT: implicit
  DimVector(const DimVector& o) {
    if (o.size_ > kInline) grow(o.size_);
    for (size_t i = 0; i < o.size_; ++i) data_[i] = o.data_[i];
    size_ = o.size_;
  }
  DimVector(DimVector&& o) noexcept { take(o); }
  ~DimVector() { release(); }

  DimVector& operator=(const DimVector& o) {
    if (this != &o) {
      size_ = 0;
      append(o.begin(), o.end());
    }
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  DimVector& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT: implicit

  // --- element access
  int64_t& operator[](size_t i) { return data_[i]; }
  const int64_t& operator[](size_t i) const { return data_[i]; }
  int64_t& at(size_t i) {
    if (i >= size_) throw_out_of_range(i);
    return data_[i];
  }
  const int64_t& at(size_t i) const {
    if (i >= size_) throw_out_of_range(i);
    return data_[i];
  }
  int64_t& front() { return data_[0]; }
  const int64_t& front() const { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  const int64_t& back() const { return data_[size_ - 1]; }
  int64_t* data() noexcept { return data_; }
  const int64_t* data() const noexcept { return data_; }

  // --- iterators
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  // --- size
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }

  // --- modifiers
  void clear() noexcept { size_ = 0; }
  void push_back(int64_t v) {
    if (size_ == capacity_) grow(size_ + 1);
    data_[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_t n, int64_t v = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = v;
    size_ = n;
  }
  void assign(size_t n, int64_t v) {
    size_ = 0;
    resize(n, v);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    // a range of the vector itself stays readable: copy it first
    if constexpr (std::is_pointer_v<It>) {
      const auto at = reinterpret_cast<std::uintptr_t>(first);  // addresses: first may point anywhere
      if (at >= reinterpret_cast<std::uintptr_t>(data_) && at < reinterpret_cast<std::uintptr_t>(data_ + capacity_)) {
        *this = DimVector(first, last);
        return;
      }
    }
    size_ = 0;
    append(first, last);
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v);
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const DimVector values(first, last);  // a copy: the range may lie in this vector
    return insert_range(pos, values.data_, values.size_);
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last);
  void swap(DimVector& o) noexcept {
    DimVector t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const DimVector& a, const DimVector& b) noexcept {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }
  friend std::strong_ordering operator<=>(const DimVector& a, const DimVector& b) noexcept {
    for (size_t i = 0; i < a.size_ && i < b.size_; ++i)
      if (a.data_[i] != b.data_[i]) return a.data_[i] <=> b.data_[i];
    return a.size_ <=> b.size_;
  }

 private:
  // appends [first, last), which must not lie in this vector
  template <typename It>
  void append(It first, It last) {
    if constexpr (std::is_base_of_v<std::forward_iterator_tag, typename std::iterator_traits<It>::iterator_category>)
      reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  bool on_heap() const noexcept { return data_ != inline_; }
  // inline: a tensor's shape and strides are moved and destroyed on every op
  void release() noexcept {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    size_ = 0;
    capacity_ = kInline;
  }
  void take(DimVector& o) noexcept {
    if (o.on_heap()) {
      data_ = o.data_;
      capacity_ = o.capacity_;
    } else {
      for (size_t i = 0; i < o.size_; ++i) inline_[i] = o.inline_[i];
    }
    size_ = o.size_;
    o.data_ = o.inline_;
    o.size_ = 0;
    o.capacity_ = kInline;
  }
  void grow(size_t n);  // capacity for at least n values, contents kept
  iterator insert_range(const_iterator pos, const int64_t* values, size_t n);
  [[noreturn]] void throw_out_of_range(size_t i) const;

  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInline;
  int64_t inline_[kInline];
};

inline void swap(DimVector& a, DimVector& b) noexcept { a.swap(b); }

}  // namespace loom

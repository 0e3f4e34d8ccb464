// HeapOptional<T>: an optional value kept on the heap, so an empty one costs one pointer (8 bytes)
// instead of sizeof(T). For rarely set members of a struct held a million times (JobSpec::http:
// std::optional<HttpTarget> took 120 of a JobSpec's 512 bytes in every job). Value semantics like
// std::optional: copies copy the value, moves move the pointer, == compares values.
#ifndef GNOMON_HEAP_OPTIONAL_H_
#define GNOMON_HEAP_OPTIONAL_H_

#include <memory>
#include <optional>
#include <utility>

namespace gnomon {

template <class T>
class HeapOptional {
 public:
  HeapOptional() = default;
  HeapOptional(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): as std::optional
  HeapOptional(T value)            // NOLINT(google-explicit-constructor): as std::optional
      : p_(std::make_unique<T>(std::move(value))) {}
  HeapOptional(const HeapOptional& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  HeapOptional(HeapOptional&&) noexcept = default;
  HeapOptional& operator=(const HeapOptional& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  HeapOptional& operator=(HeapOptional&&) noexcept = default;
  HeapOptional& operator=(std::nullopt_t) {
    p_.reset();
    return *this;
  }
  HeapOptional& operator=(T value) {
    p_ = std::make_unique<T>(std::move(value));
    return *this;
  }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  // REQUIRES: has_value().
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  template <class... Args>
  T& emplace(Args&&... args) {
    p_ = std::make_unique<T>(std::forward<Args>(args)...);
    return *p_;
  }
  void reset() { p_.reset(); }

  friend bool operator==(const HeapOptional& a, const HeapOptional& b) {
    if (!a.p_ || !b.p_) return !a.p_ && !b.p_;
    return *a.p_ == *b.p_;
  }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace gnomon

#endif  // GNOMON_HEAP_OPTIONAL_H_

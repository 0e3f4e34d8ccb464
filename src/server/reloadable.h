// Reloadable<T>: a value that SIGHUP may replace while requests and fires read it (tokens, quotas).
// Get() returns the current value, shared: a reader keeps the value it took for as long as it
// needs it, and a Set() meanwhile does not change it under the reader. Thread-safe.
#ifndef GNOMON_SRC_SERVER_RELOADABLE_H_
#define GNOMON_SRC_SERVER_RELOADABLE_H_

#include <memory>
#include <mutex>
#include <utility>

namespace gnomon::server {

template <typename T>
class Reloadable {
 public:
  explicit Reloadable(T value) : value_(std::make_shared<const T>(std::move(value))) {}

  std::shared_ptr<const T> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  void Set(T value) {
    auto fresh = std::make_shared<const T>(std::move(value));
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(fresh);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> value_;  // guarded by mu_
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_RELOADABLE_H_

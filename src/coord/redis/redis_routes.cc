#include "src/coord/redis/redis_routes.h"

#include <utility>

namespace gnomon::coord {

int RedisRoutes::Add(std::function<void()> listener) {
  MutexLock lock(mu_);
  const int handle = next_++;
  listeners_.emplace(handle, std::move(listener));
  return handle;
}

void RedisRoutes::Remove(int handle) {
  MutexLock lock(mu_);
  listeners_.erase(handle);
}

void RedisRoutes::Changed() {
  MutexLock lock(mu_);
  for (const auto& [handle, listener] : listeners_) listener();
}

void RedisRoutes::PrimaryIs(const std::string& address) {
  {
    MutexLock lock(primary_mu_);
    if (primary_ == address) return;
    const bool first = primary_.empty();
    primary_ = address;
    if (first) return;
  }
  Changed();
}

}  // namespace gnomon::coord

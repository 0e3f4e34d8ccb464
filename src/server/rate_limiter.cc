#include "src/server/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace gnomon::server {

Duration RateLimiter::Take(std::string_view key, int per_minute, int burst, Duration now) {
  if (per_minute <= 0) return Duration(0);
  const double capacity = std::max(1, burst);
  const double per_ms = per_minute / 60000.0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) it = buckets_.emplace(std::string(key), Bucket{capacity, now}).first;
  Bucket& b = it->second;
  const double elapsed_ms = static_cast<double>(std::max<int64_t>(0, (now - b.updated).count()));
  b.tokens = std::min(capacity, b.tokens + elapsed_ms * per_ms);
  b.updated = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return Duration(0);
  }
  return Duration(static_cast<int64_t>(std::ceil((1 - b.tokens) / per_ms)));
}

}  // namespace gnomon::server

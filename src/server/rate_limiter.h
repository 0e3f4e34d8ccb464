// RateLimiter: a token bucket per key (a token's name): at most `per_minute` calls a minute on
// average, `burst` at once. Keys are the configured tokens (a bounded set); the state of a key is
// a few bytes. Measured on the monotonic clock the caller passes. Thread-safe.
#ifndef GNOMON_SRC_SERVER_RATE_LIMITER_H_
#define GNOMON_SRC_SERVER_RATE_LIMITER_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "gnomon/time.h"

namespace gnomon::server {

class RateLimiter {
 public:
  // Takes one call from `key`'s bucket at monotonic time `now`: Duration(0) when allowed, else how
  // long until one is (the call is refused and not counted). per_minute <= 0 = unlimited.
  Duration Take(std::string_view key, int per_minute, int burst, Duration now);

 private:
  struct Bucket {
    double tokens = 0;
    Duration updated{0};
  };
  std::mutex mu_;
  std::map<std::string, Bucket, std::less<>> buckets_;  // guarded by mu_
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_RATE_LIMITER_H_

// RedisStore (internal): what every part of RedisCoordinator shares: the options, the key base
// "<prefix>:<ns>", the connection pool (with the scripts loaded) and the measured offset of the
// server's clock. The role classes (RedisClaims, RedisFires, RedisRunHistory, RedisDefinitions,
// RedisAudit, RedisNodes) each hold a reference to one RedisStore and build their script calls
// with its JobBase and CommonArgs; the key layout is in gnomon/redis_coordinator.h.
//
// Thread safety: safe to use from many threads at once (the pool is thread-safe; the clock offset
// is atomic). Outlives the role classes that refer to it (RedisCoordinator destroys it last).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "src/coord/redis/redis_connection.h"
#include "src/coord/redis/redis_scripts.h"

namespace gnomon::coord {

class RedisStore {
 public:
  // The connections' settings (with the TLS context loaded: InvalidArgument when a TLS file
  // cannot be read).
  static Result<RedisConnectionConfig> ConnectionConfigOf(const RedisOptions& options);
  // Checks the options, connects, checks persistence and loads the scripts; errors as
  // RedisCoordinator::Open's.
  static Result<std::unique_ptr<RedisStore>> Open(const RedisOptions& options);

  const RedisOptions& options() const { return options_; }
  // The base of the shared keys "<prefix>:<ns>:{~shared}" (KEYS[2] of every script).
  const std::string& shared() const { return shared_; }
  RedisConnectionPool& conn() { return *conn_; }
  // The settings of every connection (a subscriber connection is made from them).
  const RedisConnectionConfig& config() const { return config_; }
  // True when Open found the server without `appendonly yes` and allow_unsafe let it through.
  bool unsafe_persistence() const { return unsafe_persistence_; }

  // A job's key base "<prefix>:<ns>:{g<group>}:job:<job>" (KeyGroup).
  std::string JobBase(const std::string& job_id) const;
  // ARGV[1..4] every script takes: now override ("" = server TIME), caps, retention.
  std::vector<std::string> CommonArgs() const;

  // The backend clock: the server's TIME (or clock_override); measures the server's offset.
  Result<Instant> Now();
  // The server-clock instant after which a claim sent now must not be applied: the client has
  // given up on it by then (io_timeout), so applying it would leave a claim nobody runs. Empty
  // (no deadline) until Now has measured the server's clock.
  std::string ClaimDeadline(Duration lease_ttl) const;

 private:
  RedisStore(const RedisOptions& options, const RedisConnectionConfig& config,
             std::unique_ptr<RedisConnectionPool> conn, bool unsafe_persistence);

  const RedisOptions options_;
  const std::string base_;    // "<prefix>:<ns>"
  const std::string shared_;  // base_ + ":{~shared}"
  const RedisConnectionConfig config_;
  // The connections (plain or TLS), reconnects and scripts (hides hiredis and OpenSSL).
  const std::unique_ptr<RedisConnectionPool> conn_;
  const bool unsafe_persistence_;
  // Server clock minus this host's clock (ms), measured by every Now(); used to give each claim a
  // deadline on the server's clock. Unknown (no deadline) until the first measurement.
  std::atomic<int64_t> server_offset_ms_{0};
  std::atomic<bool> server_offset_known_{false};
};

namespace redis {

// The number of key groups and a job's group: the low 10 bits of the job id's 64-bit FNV-1a
// hash (the scripts' group_of computes the same). Part of the key layout: changing either
// re-keys every job.
inline constexpr int kKeyGroups = 1024;
int KeyGroup(std::string_view job_id);
// A group's key base "<base>:{g<group>}".
std::string GroupBase(const std::string& base, int group);

// The arguments of script `id` up to the fire's (job, ms, shard), after `common` (ARGV[1..4]).
redis_scripts::ArgList FireArgs(redis_scripts::Id id, const FireKey& fire,
                                std::vector<std::string> common);
// FireArgs of `claim`'s fire, then its token (a fenced script's arguments).
redis_scripts::ArgList FencedArgs(redis_scripts::Id id, const gnomon::Claim& claim,
                                  std::vector<std::string> common);

}  // namespace redis
}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_

#include "src/coord/redis/redis_store.h"

#include <algorithm>

#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_layout.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using redis::IntAt;
using redis::IsArray;
using redis::IsValidKeyPart;
using redis::Malformed;
using redis::Ms;

}  // namespace

Result<RedisConnectionConfig> RedisStore::ConnectionConfigOf(const RedisOptions& options) {
  if (!options.sentinels.empty() && options.sentinel_master.empty()) {
    return InvalidArgumentError("redis: sentinels need a master name");
  }
  RedisConnectionConfig config;
  if (options.tls.enabled) {
    Result<std::shared_ptr<const RedisTlsContext>> tls = RedisTlsContext::Create(options.tls);
    if (!tls.ok()) return tls.status();
    config.tls = std::move(*tls);
  } else if (options.tls != TlsOptions{}) {
    return InvalidArgumentError("redis: TLS options are set but tls.enabled is false");
  }
  config.host = options.host;
  config.port = options.port;
  config.user = options.user;
  config.password = options.password;
  config.db = options.db;
  config.connect_timeout = options.connect_timeout;
  config.io_timeout = options.io_timeout;
  config.backoff_min = options.reconnect_backoff_min;
  config.backoff_max = options.reconnect_backoff_max;
  config.sentinels = options.sentinels;
  config.sentinel_master = options.sentinel_master;
  return config;
}

Result<std::unique_ptr<RedisStore>> RedisStore::Open(const RedisOptions& options) {
  if (options.host.empty()) return InvalidArgumentError("redis: host is empty");
  if (options.port < 1 || options.port > 65535) {
    return InvalidArgumentError("redis: port " + std::to_string(options.port) + " is not 1-65535");
  }
  if (options.db < 0) return InvalidArgumentError("redis: db is negative");
  if (!IsValidKeyPart(options.prefix) || !IsValidKeyPart(options.ns)) {
    return InvalidArgumentError("redis: prefix and ns must match [A-Za-z0-9_.-]{1,64}");
  }
  if (options.connect_timeout <= Duration(0) || options.io_timeout <= Duration(0)) {
    return InvalidArgumentError("redis: connect_timeout and io_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= Duration(0) ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return InvalidArgumentError("redis: reconnect backoff must be positive and min <= max");
  }
  if (options.fire_retention < std::chrono::hours(1)) {
    return InvalidArgumentError("redis: fire_retention must be at least 1h");
  }
  if (options.max_records_per_job < 1 || options.max_records_total < 1) {
    return InvalidArgumentError("redis: record caps must be at least 1");
  }
  if (options.wait_replicas < 0 || options.wait_replicas > 16) {
    return InvalidArgumentError("redis: wait_replicas must be 0-16, not " +
                                std::to_string(options.wait_replicas));
  }
  if (options.wait_replicas > 0 &&
      (options.wait_timeout <= Duration(0) || options.wait_timeout >= options.io_timeout)) {
    return InvalidArgumentError(
        "redis: wait_timeout must be positive and below io_timeout with wait_replicas");
  }
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgumentError("redis: connections must be 1-64, not " +
                                std::to_string(options.connections));
  }
  Result<RedisConnectionConfig> config = ConnectionConfigOf(options);
  if (!config.ok()) return config.status();
  Result<std::unique_ptr<RedisConnectionPool>> conn =
      RedisConnectionPool::Connect(*config, options.connections);
  if (!conn.ok()) return conn.status();

  // Persistence: acknowledged claims must survive a server restart (docs/reliability.md F3/F4).
  bool durable = false;
  std::string why;
  Result<RedisReply> aof = (*conn)->Command({"CONFIG", "GET", "appendonly"});
  if (!aof.ok()) return aof.status();
  if (aof->is_error()) {
    why = "cannot read its persistence settings (CONFIG GET appendonly: " + aof->str + ")";
  } else if (IsArray(*aof, 2) && aof->elements[1].str == "yes") {
    durable = true;
  } else {
    why = "it runs without `appendonly yes`, so a restart loses acknowledged claims";
  }
  if (!durable && !options.allow_unsafe) {
    return FailedPreconditionError("redis " + (*conn)->address() + ": " + why +
                                   "; enable AOF or set allow_unsafe to run anyway");
  }
  for (int id = 0; id < scripts::kCount; ++id) {
    GNOMON_CHECK((*conn)->AddScript(scripts::Source(static_cast<scripts::Id>(id))) == id);
  }
  GNOMON_RETURN_IF_ERROR((*conn)->LoadScripts());
  GNOMON_RETURN_IF_ERROR(redis::CheckLayout(**conn, options.prefix + ":" + options.ns));
  std::unique_ptr<RedisStore> store(new RedisStore(options, *config, std::move(*conn), !durable));
  (void)store->Now();  // measures the server's clock offset for claim deadlines
  return store;
}

RedisStore::RedisStore(const RedisOptions& options, const RedisConnectionConfig& config,
                       std::unique_ptr<RedisConnectionPool> conn, bool unsafe_persistence)
    : options_(options),
      base_(options.prefix + ":" + options.ns),
      shared_(base_ + ":{~shared}"),
      config_(config),
      conn_(std::move(conn)),
      unsafe_persistence_(unsafe_persistence) {}

std::string RedisStore::JobBase(const std::string& job_id) const {
  return redis::GroupBase(base_, redis::KeyGroup(job_id)) + ":job:" + job_id;
}

std::vector<std::string> RedisStore::CommonArgs() const {
  return {options_.clock_override ? Ms(options_.clock_override->Now()) : std::string(),
          std::to_string(options_.max_records_per_job), std::to_string(options_.max_records_total),
          Ms(options_.fire_retention)};
}

Result<Instant> RedisStore::Now() {
  if (options_.clock_override) return options_.clock_override->Now();
  Result<RedisReply> r = conn_->Command({"TIME"});
  if (!r.ok()) return r.status();
  int64_t sec = 0, usec = 0;
  if (!IsArray(*r, 2) || !IntAt(*r, 0, sec) || !IntAt(*r, 1, usec)) return Malformed("TIME");
  const Instant server = Instant::FromUnixMillis(sec * 1000 + usec / 1000);
  server_offset_ms_ = (server - SystemClock::Get().Now()).count();
  server_offset_known_ = true;
  return server;
}

std::string RedisStore::ClaimDeadline(Duration lease_ttl) const {
  // The client waits io_timeout for the answer; half a second more covers the offset's error.
  // Never more than half the lease: a claim applied later would reach a holder that already
  // counts most of its lease as gone (it self-fences at ttl - margin after sending the claim).
  const Duration allowance =
      std::min<Duration>(options_.io_timeout + std::chrono::milliseconds(500), lease_ttl / 2);
  if (options_.clock_override) return Ms(options_.clock_override->Now() + allowance);
  if (!server_offset_known_) return "";
  return Ms(SystemClock::Get().Now() + Duration(server_offset_ms_.load()) + allowance);
}

namespace redis {

int KeyGroup(std::string_view job_id) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : job_id) h = (h ^ c) * 0x100000001b3ULL;
  return static_cast<int>(h % kKeyGroups);
}

std::string GroupBase(const std::string& base, int group) {
  return base + ":{g" + std::to_string(group) + "}";
}

scripts::ArgList FireArgs(scripts::Id id, const FireKey& fire, std::vector<std::string> common) {
  scripts::ArgList args(scripts::ArgNames(id), std::move(common));
  args.Add("job", fire.job_id)
      .Add("ms", Ms(fire.scheduled_at))
      .Add("shard", std::to_string(fire.shard));
  return args;
}

scripts::ArgList FencedArgs(scripts::Id id, const gnomon::Claim& claim,
                            std::vector<std::string> common) {
  scripts::ArgList args = FireArgs(id, claim.fire, std::move(common));
  args.Add("token", std::to_string(claim.fencing_token));
  return args;
}

}  // namespace redis
}  // namespace gnomon::coord

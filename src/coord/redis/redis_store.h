// RedisStore (internal): what every part of RedisCoordinator shares: the options, the key base
// "<prefix>:<ns>", the way to the server (one primary's connection pool, or under a Redis
// Cluster the routing client, with the scripts of that topology loaded) and the measured offset
// of the server's clock. The role classes (RedisClaims, RedisFires, RedisRunHistory,
// RedisDefinitions, RedisAudit, RedisNodes) each hold a reference to one RedisStore and send
// every call through its Eval, EvalBatch and Command, with KEYS from JobBase, IndexBase and
// shared(); the key layout is in gnomon/redis_coordinator.h.
//
// Under a Cluster (docs/redis-cluster.md) a script runs in one slot: a job's scripts in its key
// group's (IndexBase), a batch split into one call per primary (EvalBatch), the shared keys in
// the shared slot. A script that lists new history records leaves them in the runs_new of its
// KEYS[2]'s group; Eval copies them into the all-jobs listing right after (CopyNewRuns).
//
// Thread safety: safe to use from many threads at once (the pool and the routing client are
// thread-safe; the clock offset is atomic). Outlives the role classes that refer to it
// (RedisCoordinator destroys it last).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "src/coord/redis/redis_cluster.h"
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
  // The base of the shared keys "<prefix>:<ns>:{~shared}".
  const std::string& shared() const { return shared_; }
  // True under a Redis Cluster.
  bool cluster() const { return cluster_ != nullptr; }
  // The Cluster's client. REQUIRES: cluster().
  RedisClusterClient& cluster_client() {
    GNOMON_CHECK(cluster_ != nullptr);
    return *cluster_;
  }
  // Told when a part of the keyspace may be served elsewhere: a new primary named by the
  // sentinels, a Cluster's slots moved or a primary back (redis_routes.h).
  RedisRoutes& routes() const { return *config_.routes; }
  // The one primary's pool. REQUIRES: !cluster().
  RedisConnectionPool& conn() {
    GNOMON_CHECK(conn_ != nullptr);
    return *conn_;
  }
  // "host:port" of the server calls about `key` go to (for messages).
  std::string AddressOf(const std::string& key) const;

  // KEYS[2] of a script over `job_id`'s keys: the shared base on one primary, the job's key
  // group's base under a Cluster.
  std::string IndexBase(const std::string& job_id) const;
  // Runs script `id` with `keys` (KEYS[2] decides the slot under a Cluster); a script that lists
  // new history records is followed, under a Cluster, by CopyNewRuns of its group.
  Result<RedisReply> Eval(redis_scripts::Id id, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args);
  // Eval, then `then` on the same connection right after a script answer that is not an error
  // (WAIT: it counts the replicas of that server that have the script's writes); its reply goes
  // to `then_reply`.
  Result<RedisReply> EvalThen(redis_scripts::Id id, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args,
                              const std::vector<std::string>& then, RedisReply& then_reply);
  // A batch over `items` (each item's first argument is its job id): `send(part, index_base)`
  // sends one script call over `part` with KEYS[2] = `index_base`. On one primary one call with
  // every item and the shared base; under a Cluster one call per primary (the script must be
  // redis_scripts::CrossSlot) with the base of one of its items' groups, the replies put back in
  // the items' order; the primaries' calls go at once, `send` on a thread per primary (so it
  // must be safe to call from many threads). Each element of the reply answers its item; an
  // item whose primary's call failed gets an error element with the failure's text (ErrorOf).
  using BatchItems = std::vector<const std::vector<std::string>*>;
  using SendPart =
      std::function<Result<RedisReply>(const BatchItems& part, const std::string& index_base)>;
  Result<RedisReply> EvalBatch(const BatchItems& items, const SendPart& send);
  // One command over keys of `key`'s slot.
  Result<RedisReply> Command(const std::string& key, const std::vector<std::string>& argv);
  // Under a Cluster: moves the history members waiting in `group`'s runs_new into the all-jobs
  // listing (ZADD there, then ZREM from runs_new), and bounds the listing to
  // max_records_total members (the oldest leave it; their records stay under their jobs, each
  // within its job's cap). With `came_before`, only the members that came before it (server
  // clock): a sweep leaves the newer ones to the call that made them.
  Status CopyNewRuns(int group, std::optional<Instant> came_before = std::nullopt);
  // Under a Cluster: CopyNewRuns(group, came_before) of every group of `groups` (all of one
  // primary), with one call there to read them (kSweepNewRuns) and the moves only for the
  // groups that have members to move.
  Status SweepNewRuns(const std::vector<int>& groups, Instant came_before);
  // Under a Cluster: the key groups by the primary that serves them (every group once), in the
  // order of the current slot map.
  std::vector<std::vector<int>> GroupsByPrimary() const;
  // The settings of every connection, for one to the server calls about `key` go to (under a
  // Cluster, its slot's primary in the current map; a subscriber connection is made from
  // them); nullopt when the map names none.
  std::optional<RedisConnectionConfig> ConfigFor(const std::string& key) const;
  // True when Open found the server without `appendonly yes` and allow_unsafe let it through.
  bool unsafe_persistence() const { return unsafe_persistence_; }

  // A job's key base "<prefix>:<ns>:{g<group>}:job:<job>" (KeyGroup).
  std::string JobBase(const std::string& job_id) const;
  // ARGV[1..4] every script takes: now override ("" = server TIME), caps, retention.
  std::vector<std::string> CommonArgs() const;
  // The arguments of batch script `id` (ArgNames: n, then a rest) over `part`: CommonArgs, the
  // item count, then every item's arguments.
  std::vector<std::string> BatchArgs(redis_scripts::Id id, const BatchItems& part) const;

  // The backend clock: the server's TIME (or clock_override); measures the server's offset.
  Result<Instant> Now();
  // The server-clock instant after which a claim sent now must not be applied: the client has
  // given up on it by then (io_timeout), so applying it would leave a claim nobody runs. Empty
  // (no deadline) until Now has measured the server's clock.
  std::string ClaimDeadline(Duration lease_ttl) const;

 private:
  // CopyNewRuns' second half: `members` (a reply listing members of `group`'s runs_new) into the
  // all-jobs listing, the listing's cap, then their removal from runs_new.
  Status MoveNewRuns(int group, const RedisReply& members);
  RedisStore(const RedisOptions& options, const RedisConnectionConfig& config,
             std::unique_ptr<RedisConnectionPool> conn, std::unique_ptr<RedisClusterClient> cluster,
             bool unsafe_persistence);
  // Open's checks of `options`.
  static Status CheckOptions(const RedisOptions& options);
  // Under a Cluster, after script `id` answered in the slot of `index_base` (a group's base):
  // copies the group's new history members when the script can list some.
  void AfterGroupScript(redis_scripts::Id id, const std::string& index_base);
  // Open under a Cluster.
  static Result<std::unique_ptr<RedisStore>> OpenCluster(const RedisOptions& options,
                                                         const RedisConnectionConfig& config);

  const RedisOptions options_;
  const std::string base_;    // "<prefix>:<ns>"
  const std::string shared_;  // base_ + ":{~shared}"
  const RedisConnectionConfig config_;
  // The connections (plain or TLS), reconnects and scripts (hides hiredis and OpenSSL); null
  // under a Cluster.
  const std::unique_ptr<RedisConnectionPool> conn_;
  // Under a Cluster: the slot map and a pool per primary; else null.
  const std::unique_ptr<RedisClusterClient> cluster_;
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
// The Status an error element of EvalBatch's reply stands for (Unavailable with its text).
Status ErrorOf(const RedisReply& element);

// The arguments of script `id` up to the fire's (job, ms, shard), after `common` (ARGV[1..4]).
redis_scripts::ArgList FireArgs(redis_scripts::Id id, const FireKey& fire,
                                std::vector<std::string> common);
// FireArgs of `claim`'s fire, then its token (a fenced script's arguments).
redis_scripts::ArgList FencedArgs(redis_scripts::Id id, const gnomon::Claim& claim,
                                  std::vector<std::string> common);

}  // namespace redis
}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_STORE_H_

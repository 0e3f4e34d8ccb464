// The key layout a Redis keyspace holds (internal; the layout is in gnomon/redis_coordinator.h):
// the check RedisStore::Open makes, and the moves of a keyspace written by an earlier release
// (one slot per job: "B:{job}:…", global "B:leases", "B:runs", "B:jobs", …) to key groups, and
// from key groups to the ledger layout (RedisCoordinator::MigrateKeyGroups, `gnomon migrate
// redis-groups`).
//
// Thread safety: the functions use the pool's thread-safe calls; run one migration at a time.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "src/coord/redis/redis_cluster.h"
#include "src/coord/redis/redis_connection.h"

namespace gnomon::coord::redis {

// The marker key's values: the key-group layout of earlier releases, and the layout this version
// writes (its job's state, fire markers and records in one hash, gnomon/redis_coordinator.h).
inline constexpr std::string_view kGroupLayout = "groups";
inline constexpr std::string_view kLedgerLayout = "ledger";

// When `key` is a per-job key of the earlier layout under `base` ("<base>:{<job>}:state", :live,
// :runs, :fire:…, :run:…): the same key under key groups. Else nothing.
std::optional<std::string> GroupKeyOf(const std::string& base, std::string_view key);

// OK when the keyspace under `base` holds the group layout, or holds nothing of gnomon's yet
// (then the marker "<base>:{~shared}:layout" is written). FailedPrecondition naming
// `gnomon migrate redis-groups` when it holds the earlier layout, or naming the layout it does
// not know.
Status CheckLayout(RedisConnectionPool& conn, const std::string& base);
// The same under a Redis Cluster, where no earlier layout can be (gnomon ran on one primary
// only): writes the marker when there is none, and refuses a layout it does not know.
Status CheckClusterLayout(RedisClusterClient& cluster, const std::string& base);

// Moves the keyspace under `base` to key groups (see RedisCoordinator::MigrateKeyGroups).
Result<KeyGroupMigration> MigrateToGroups(RedisConnectionPool& conn, const std::string& base);

// Sends `argv` to the server that holds `key` (one primary, or the key's slot's owner).
using KeyCommand =
    std::function<Result<RedisReply>(const std::string& key, const std::vector<std::string>& argv)>;
// Moves a key-group keyspace under `base` to the ledger layout, in place (see
// RedisCoordinator::MigrateKeyGroups). `scan_keys`: one key of each primary, whose server a SCAN
// is sent to. Adds the keys it moved to `done.ledger_keys`.
Status MigrateToLedger(const KeyCommand& command, const std::vector<std::string>& scan_keys,
                       const std::string& base, KeyGroupMigration& done);
// MigrateToLedger when the keyspace holds key groups, once no node's heartbeat is live (else
// FailedPrecondition naming them); writes the marker into a keyspace with nothing of gnomon's;
// nothing when it holds the ledger layout. `address` names the server in errors.
Status MoveToLedger(const KeyCommand& command, const std::vector<std::string>& scan_keys,
                    const std::string& base, const std::string& address, KeyGroupMigration& done);

}  // namespace gnomon::coord::redis

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_H_

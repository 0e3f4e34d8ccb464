// Test helpers for the layout moves (tests only, CMake target gnomon_redis_layout_testing): a
// keyspace of the key-group layout as its releases wrote it, and the check that
// RedisCoordinator::MigrateKeyGroups carries it over to the ledger layout with nothing lost, on
// one primary (redis_coordinator_test.cc) and on a Redis Cluster (redis_cluster_test.cc).
//
// Thread safety: none; use from the test's main thread.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_TESTING_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_TESTING_H_

#include <functional>
#include <string>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "gnomon/testing/fake_clock.h"

namespace gnomon::testing {

// Sends `argv` to the server that holds `key` (the one primary, or the owner of the key's slot);
// the reply as text: a string, a status, an error, an integer's digits ("" on failure).
using KeyCommandText =
    std::function<std::string(const std::string& key, const std::vector<std::string>& argv)>;
// Every key matching `pattern`, over every primary.
using KeysMatching = std::function<std::vector<std::string>(const std::string& pattern)>;

// Writes a keyspace of the key-group layout under `o`'s prefix and namespace, then checks (with
// GoogleTest assertions) that RedisCoordinator::Open refuses it naming the migration; that
// MigrateKeyGroups refuses while a node of it still sends heartbeats, then moves every job's
// state, open fire, markers and records into the job's hash, leaves none of the earlier keys and
// is done the second time; and that the keyspace keeps every guarantee: recorded fires are not
// claimed again (also one whose record was trimmed), tokens keep increasing, history,
// definitions, pause, the open fire's lease and its holder. `clock` is `o`'s.
void CheckKeyGroupMigration(const KeyCommandText& command, const KeysMatching& keys, RedisOptions o,
                            FakeClock& clock);

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_LAYOUT_TESTING_H_

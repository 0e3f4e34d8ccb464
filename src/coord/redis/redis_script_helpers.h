// The Lua definitions the RedisCoordinator scripts share (internal): `local` values and
// `local function`s, each included in a script's source only when the script names it
// (redis_scripts.cc, WithHelpers), because every run of a script re-creates every closure of
// its source and the Redis server's CPU is the fleet's bottleneck.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_SCRIPT_HELPERS_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_SCRIPT_HELPERS_H_

#include <span>

namespace gnomon::coord::redis_scripts {

struct ScriptHelper {
  const char* name;  // what a script names to include it
  const char* code;  // its Lua definition
};

// The definitions in dependency order: one uses only those before it.
std::span<const ScriptHelper> ScriptHelpers();
// Under a Redis Cluster, the definitions that replace ScriptHelpers()' of the same name.
std::span<const ScriptHelper> ClusterHelpers();

}  // namespace gnomon::coord::redis_scripts

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_SCRIPT_HELPERS_H_

// RedisNodes (internal): RedisCoordinator's NodeRegistry (gnomon/node_registry.h): heartbeats in
// B:nodes ("<last heartbeat ms>\n<encoded NodeInfo>") and B:nodes:exp (node -> expiry), written
// by the heartbeat script, which also drops expired nodes; the listing is sorted by node id.
//
// Thread safety: safe to call from many threads at once (state lives on the server).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_NODES_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_NODES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisNodes {
 public:
  // `store` must outlive this object.
  explicit RedisNodes(RedisStore& store) : store_(store) {}
  RedisNodes(const RedisNodes&) = delete;
  RedisNodes& operator=(const RedisNodes&) = delete;

  Status Heartbeat(const NodeInfo& node, Duration ttl);
  Result<std::vector<NodeInfo>> ListNodes();

 private:
  RedisStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_NODES_H_

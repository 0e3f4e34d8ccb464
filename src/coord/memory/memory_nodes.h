// MemoryNodes: the in-memory coordinator's node registry (internal): heartbeats with their
// expiry on the backend clock; listing drops the expired ones.
//
// Thread safety: safe from many threads; every method locks the shared MemoryState::mu for its
// whole run (the only lock).
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_NODES_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_NODES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::coord::memory {

class MemoryNodes {
 public:
  // REQUIRES: `state` outlives this object.
  explicit MemoryNodes(MemoryState& state) : s_(state) {}

  // As the Coordinator methods of the same names.
  Status Heartbeat(const NodeInfo& node, Duration ttl);
  Result<std::vector<NodeInfo>> ListNodes();

 private:
  MemoryState& s_;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_NODES_H_

// NodeRegistry: the role of the coordinator that knows which nodes are alive: each node's
// heartbeat, with what it reports of itself. Part of Coordinator (gnomon/coordinator.h).
//
// Time. Heartbeat expiry uses the backend's clock.
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_NODE_REGISTRY_H_
#define GNOMON_NODE_REGISTRY_H_

#include <string>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

struct NodeInfo {
  std::string node_id;
  std::string host;
  std::string version;
  Instant started_at;
  Instant last_heartbeat;  // backend clock, set by Heartbeat
  int running = 0;         // runs in progress on the node
  Duration clock_skew{0};  // node clock minus backend clock, as the node measured it
};

class NodeRegistry {
 public:
  virtual ~NodeRegistry() = default;

  // Records the node as alive until the backend's clock + ttl. InvalidArgument for an empty
  // node_id or a ttl <= 0.
  virtual Status Heartbeat(const NodeInfo& node, Duration ttl) = 0;
  // Nodes whose heartbeat has not expired, by node_id.
  virtual Result<std::vector<NodeInfo>> ListNodes() = 0;
};

}  // namespace gnomon

#endif  // GNOMON_NODE_REGISTRY_H_

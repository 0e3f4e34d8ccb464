#include "src/coord/memory/memory_nodes.h"

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::memory {

Status MemoryNodes::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::lock_guard<std::mutex> lock(s_.mu);
  const Instant now = s_.clock.Now();
  MemoryState::Node& entry = s_.nodes[node.node_id];
  entry.info = node;
  entry.info.last_heartbeat = now;
  entry.expires_at = now + ttl;
  return Status::Ok();
}

Result<std::vector<NodeInfo>> MemoryNodes::ListNodes() {
  std::lock_guard<std::mutex> lock(s_.mu);
  const Instant now = s_.clock.Now();
  std::vector<NodeInfo> out;
  for (auto it = s_.nodes.begin(); it != s_.nodes.end();) {
    if (it->second.expires_at <= now) {
      it = s_.nodes.erase(it);
    } else {
      out.push_back(it->second.info);
      ++it;
    }
  }
  return out;
}

}  // namespace gnomon::coord::memory

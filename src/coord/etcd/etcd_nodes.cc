#include "src/coord/etcd/etcd_nodes.h"

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

Status EtcdNodes::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  const Instant now = now_();
  json j{{"host", node.host},
         {"version", node.version},
         {"started", node.started_at.unix_millis()},
         {"hb", now.unix_millis()},
         {"exp", (now + ttl).unix_millis()},
         {"running", node.running},
         {"skew_ms", node.clock_skew.count()}};
  json body{{"key", coord::Base64Encode(keys_.NodeKey(node.node_id))},
            {"value", coord::Base64Encode(j.dump())}};
  Result<json> r = kv_.client().Call("/v3/kv/put", body);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<NodeInfo>> EtcdNodes::ListNodes() {
  Snapshot s;
  const std::string prefix = keys_.prefix() + "nodes/";
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {}, {prefix}));
  const int64_t now = now_().unix_millis();
  std::vector<NodeInfo> out;
  Snapshot stale;
  Writes gone;
  for (const Kv& kv : s.prefixes[prefix]) {
    json j = json::parse(kv.value, nullptr, false);
    if (!j.is_object()) continue;
    if (j.value("exp", int64_t{0}) <= now) {
      if (stale.kvs.size() < kDeleteBatch) {
        stale.kvs[kv.key] = kv;
        gone.Delete(kv.key);
      }
      continue;
    }
    NodeInfo n;
    n.node_id = kv.key.substr(prefix.size());
    n.host = j.value("host", "");
    n.version = j.value("version", "");
    n.started_at = Instant::FromUnixMillis(j.value("started", int64_t{0}));
    n.last_heartbeat = Instant::FromUnixMillis(j.value("hb", int64_t{0}));
    n.running = j.value("running", 0);
    n.clock_skew = Duration(j.value("skew_ms", int64_t{0}));
    out.push_back(std::move(n));
  }
  // Expired heartbeats are garbage: drop them unless renewed meanwhile (best effort).
  if (!stale.kvs.empty()) (void)kv_.Commit(stale, gone);
  return out;
}
}  // namespace gnomon::coord::etcd

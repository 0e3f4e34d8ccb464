#include "src/coord/redis/redis_nodes.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

std::string EncodeNode(const NodeInfo& n) {
  std::string out;
  AppendField(out, n.host);
  AppendField(out, n.version);
  AppendField(out, Ms(n.started_at));
  AppendField(out, std::to_string(n.running));
  AppendField(out, Ms(n.clock_skew));
  return out;
}

bool DecodeNode(const std::string& node_id, std::string_view stored, NodeInfo& n) {
  size_t nl = stored.find('\n');
  int64_t hb = 0, started = 0, running = 0, skew = 0;
  if (nl == std::string_view::npos || !ParseInt(stored.substr(0, nl), hb)) return false;
  std::string_view in = stored.substr(nl + 1);
  std::string s_started, s_running, s_skew;
  n.node_id = node_id;
  if (!ReadField(in, n.host) || !ReadField(in, n.version) || !ReadField(in, s_started) ||
      !ReadField(in, s_running) || !ReadField(in, s_skew) || !ParseInt(s_started, started) ||
      !ParseInt(s_running, running) || !ParseInt(s_skew, skew)) {
    return false;
  }
  n.started_at = Instant::FromUnixMillis(started);
  n.last_heartbeat = Instant::FromUnixMillis(hb);
  n.running = static_cast<int>(running);
  n.clock_skew = Duration(skew);
  return true;
}

}  // namespace

Status RedisNodes::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::vector<std::string> args = store_.CommonArgs();
  args.insert(args.end(), {node.node_id, Ms(ttl), EncodeNode(node)});
  Result<RedisReply> r = store_.Eval(scripts::kHeartbeat, {store_.shared(), store_.shared()}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("heartbeat");
  return Status::Ok();
}

Result<std::vector<NodeInfo>> RedisNodes::ListNodes() {
  Result<RedisReply> r =
      store_.Eval(scripts::kListNodes, {store_.shared(), store_.shared()}, store_.CommonArgs());
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("list nodes");
  std::vector<NodeInfo> out;
  for (size_t i = 1; i + 1 < r->elements.size(); i += 2) {
    NodeInfo n;
    if (!DecodeNode(r->elements[i].str, r->elements[i + 1].str, n)) return Malformed("list nodes");
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.node_id < b.node_id; });
  return out;
}

}  // namespace gnomon::coord

#include "src/coord/sqlite/sqlite_nodes.h"

#include <mutex>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {

using sqlite::Statement;

Status SqliteNodes::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::lock_guard<std::mutex> lock(store_.write_mu());
  return store_.writer().conn().Transaction([&]() -> Status {
    const Instant now = store_.clock().Now();
    {
      Result<Statement> s =
          store_.writer().conn().Prepare("DELETE FROM nodes WHERE expires_ms <= ?1");
      if (!s.ok()) return s.status();
      s->Bind(1, now.unix_millis());
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    Result<Statement> s = store_.writer().conn().Prepare(
        "INSERT OR REPLACE INTO nodes (node_id, host, version, started_ms, last_heartbeat_ms, "
        "expires_ms, running, clock_skew_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (!s.ok()) return s.status();
    s->BindText(1, node.node_id)
        .BindBlob(2, node.host)
        .BindBlob(3, node.version)
        .Bind(4, node.started_at.unix_millis())
        .Bind(5, now.unix_millis())
        .Bind(6, (now + ttl).unix_millis())
        .Bind(7, int64_t{node.running})
        .Bind(8, int64_t{node.clock_skew.count()});
    return s->Run();
  });
}

Result<std::vector<NodeInfo>> SqliteNodes::ListNodes() {
  std::vector<NodeInfo> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<Statement> s = db.conn().Prepare(
        "SELECT node_id, host, version, started_ms, last_heartbeat_ms, running, clock_skew_ms "
        "FROM nodes WHERE expires_ms > ?1 ORDER BY node_id");
    if (!s.ok()) return s.status();
    s->Bind(1, store_.clock().Now().unix_millis());
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      NodeInfo n;
      n.node_id = s->Bytes(0);
      n.host = s->Bytes(1);
      n.version = s->Bytes(2);
      n.started_at = Instant::FromUnixMillis(s->Int(3));
      n.last_heartbeat = Instant::FromUnixMillis(s->Int(4));
      n.running = static_cast<int>(s->Int(5));
      n.clock_skew = Duration(s->Int(6));
      out.push_back(std::move(n));
    }
  }));
  return out;
}

}  // namespace gnomon::coord

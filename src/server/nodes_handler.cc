// GET /api/v1/nodes (NodesHandler, src/server/api_handlers.h).
#include <map>

#include "src/server/api_handlers.h"
#include "src/server/api_util.h"

namespace gnomon::server {

namespace {

// Running records read to count a namespaced caller's runs per node (pages of 1,000).
constexpr int kMaxRunningPages = 20;

// The running attempts of the jobs `who` may see, per node.
Result<std::map<std::string, int>> VisibleRunning(Coordinator& coordinator, const Principal& who) {
  std::map<std::string, int> out;
  RunQuery q;
  q.outcome = RunOutcome::kRunning;
  q.limit = 1000;
  for (int page = 0; page < kMaxRunningPages; ++page) {
    Result<RunPage> runs = coordinator.ListRuns(q);
    if (!runs.ok()) return runs.status();
    for (const RunRecord& r : runs->runs) {
      if (who.Allows(r.job_id)) ++out[r.node_id];
    }
    if (runs->next_cursor.empty()) break;
    q.cursor = runs->next_cursor;
  }
  return out;
}

}  // namespace

Response NodesHandler::Handle(Call& call) {
  Result<std::vector<NodeInfo>> nodes = coordinator_.ListNodes();
  if (!nodes.ok()) return FromStatus(nodes.status());
  std::optional<std::map<std::string, int>> running;
  if (!call.who.Global()) {
    Result<std::map<std::string, int>> visible = VisibleRunning(coordinator_, call.who);
    if (!visible.ok()) return FromStatus(visible.status());
    running = std::move(*visible);
  }
  nlohmann::json list = nlohmann::json::array();
  for (const NodeInfo& n : *nodes) {
    int count = n.running;
    if (running) {
      auto it = running->find(n.node_id);
      count = it == running->end() ? 0 : it->second;
    }
    list.push_back({{"id", n.node_id},
                    {"host", n.host},
                    {"version", n.version},
                    {"started_at", n.started_at.ToRfc3339()},
                    {"last_heartbeat", n.last_heartbeat.ToRfc3339()},
                    {"running", count},
                    {"clock_skew_ms", n.clock_skew.count()}});
  }
  return Json(200, {{"nodes", std::move(list)}});
}

}  // namespace gnomon::server

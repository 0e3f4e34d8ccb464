// GET /metrics (MetricsHandler, src/server/api_handlers.h).
#include "src/server/api_handlers.h"

namespace gnomon::server {

Response MetricsHandler::Handle(Call& call) {
  const std::shared_ptr<const JobList::Snapshot> jobs = jobs_.Now();
  metrics_.SetJobs(static_cast<int64_t>(jobs->jobs.size()));
  if (Result<std::vector<NodeInfo>> nodes = nodes_.ListNodes(); nodes.ok()) {
    metrics_.SetNodesAlive(static_cast<int64_t>(nodes->size()));
    std::vector<std::pair<std::string, Duration>> skews;
    for (const NodeInfo& n : *nodes) skews.emplace_back(n.node_id, n.clock_skew);
    metrics_.SetClockSkews(std::move(skews));
  }
  MetricsObserver::View view;
  if (!call.who.Global()) {
    // Series labelled by job are filtered, and gnomon_jobs counts the caller's jobs.
    const Principal& who = call.who;
    view.job_visible = [&who](std::string_view job) { return who.Allows(job); };
    int64_t visible = 0;
    for (const JobList::Entry& e : jobs->jobs) visible += who.Allows(e.view.spec.id) ? 1 : 0;
    view.jobs = visible;
  }
  Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render(view);
  return r;
}

}  // namespace gnomon::server

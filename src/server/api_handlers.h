// The handlers of the API's resources (docs/http-api.md "Endpoints"), one class per resource; the
// router (src/server/http_api.h) maps each route to one of them after authentication. Each class
// states what it serves; all are thread-safe (see ApiHandler).
#ifndef GNOMON_SRC_SERVER_API_HANDLERS_H_
#define GNOMON_SRC_SERVER_API_HANDLERS_H_

#include <atomic>
#include <memory>
#include <string>

#include "gnomon/coordinator.h"
#include "gnomon/scheduler.h"
#include "gnomon/time.h"
#include "src/server/api_handler.h"
#include "src/server/audit_log.h"
#include "src/server/job_catalog.h"
#include "src/server/job_list.h"
#include "src/server/metrics.h"
#include "src/server/quota.h"
#include "src/server/reloadable.h"

namespace gnomon::server {

// GET /healthz (the process serves) and GET /readyz (the backend's claims answer: Now()).
class ProbesHandler final : public ApiHandler {
 public:
  explicit ProbesHandler(ClaimStore& claims) : claims_(claims) {}
  Response Handle(Call& call) override;
  // While not ready (the node is starting), /readyz answers 503. Ready from construction.
  void SetReady(bool ready) { ready_.store(ready); }

 private:
  ClaimStore& claims_;
  std::atomic<bool> ready_{true};
};

// GET /metrics: the Prometheus exposition; a caller limited to namespaces sees the job-labelled
// series of its jobs only.
class MetricsHandler final : public ApiHandler {
 public:
  MetricsHandler(MetricsObserver& metrics, NodeRegistry& nodes, JobList& jobs)
      : metrics_(metrics), nodes_(nodes), jobs_(jobs) {}
  Response Handle(Call& call) override;

 private:
  MetricsObserver& metrics_;
  NodeRegistry& nodes_;
  JobList& jobs_;
};

// The dashboard's embedded files (GET /, /assets/...) and the OpenAPI document
// (GET /api/v1/openapi.json). `auth_required` is announced to the page in X-Gnomon-Auth.
class AssetsHandler final : public ApiHandler {
 public:
  AssetsHandler(std::string version, bool auth_required);
  Response Handle(Call& call) override;
  // Whether `path` names an embedded file.
  static bool IsAsset(std::string_view path);

 private:
  const std::string openapi_;  // the OpenAPI document, made once
  const bool auth_required_;
};

// GET /api/v1/cron/preview: the next fires of an expression.
class CronHandler final : public ApiHandler {
 public:
  CronHandler(const Clock& clock, std::shared_ptr<const Calendars> calendars)
      : clock_(clock), calendars_(std::move(calendars)) {}
  Response Handle(Call& call) override;

 private:
  // GET /api/v1/calendars: the named calendars of the config.
  Response ListCalendars() const;

  const Clock& clock_;
  const std::shared_ptr<const Calendars> calendars_;
};

// GET /api/v1/nodes: live nodes; a caller limited to namespaces sees each node's running count of
// its jobs only.
class NodesHandler final : public ApiHandler {
 public:
  explicit NodesHandler(Coordinator& coordinator) : coordinator_(coordinator) {}
  Response Handle(Call& call) override;

 private:
  Coordinator& coordinator_;
};

// GET /api/v1/audit: the audit log, newest first; a caller limited to namespaces sees the records
// of its jobs only, and pages are cut at the last record it may see.
class AuditHandler final : public ApiHandler {
 public:
  explicit AuditHandler(AuditLog& audit) : audit_(audit) {}
  Response Handle(Call& call) override;

 private:
  AuditLog& audit_;
};

// GET /api/v1/runs (the history, newest first, paged), GET /api/v1/runs/{run_id} (the attempts
// of one fire, with output), POST /api/v1/runs/{run_id}/cancel and /rerun. A caller limited to
// namespaces sees its jobs' runs only; its cursors never name a job outside them (see
// runs_handler.cc).
class RunsHandler final : public ApiHandler {
 public:
  // `scan_budget`: records read to fill one page for a caller limited to namespaces.
  RunsHandler(Scheduler& scheduler, Coordinator& coordinator, const Reloadable<Quotas>& quotas,
              int scan_budget, int max_json_depth)
      : scheduler_(scheduler),
        coordinator_(coordinator),
        quotas_(quotas),
        scan_budget_(scan_budget),
        max_json_depth_(max_json_depth) {}
  Response Handle(Call& call) override;

 private:
  Response List(Call& call);
  Response Get(Call& call);
  // POST /api/v1/runs/{run_id}/cancel (operate): Coordinator::CancelFire, audited.
  Response Cancel(Call& call);
  // POST /api/v1/runs/{run_id}/rerun (operate): Scheduler::Rerun on this node, audited.
  Response Rerun(Call& call);
  // A 400 for a malformed run id in the path, a 403 for one outside the caller's namespaces.
  std::optional<Response> CheckRunId(Call& call);
  // The fire of the run in the path (from its newest record), or the error answer.
  Result<RunRecord> LastAttempt(const std::string& run_id);
  Scheduler& scheduler_;
  Coordinator& coordinator_;
  const Reloadable<Quotas>& quotas_;
  const int scan_budget_;
  const int max_json_depth_;
};

// /api/v1/jobs: list, read, create, replace, delete (through the JobCatalog), and
// /api/v1/jobs/{id}/pause|resume|trigger|backfill (through the Scheduler). Namespace quotas are
// checked on create and trigger.
class JobsHandler final : public ApiHandler {
 public:
  struct Options {
    JobSpec job_defaults;           // applied under the keys of a created or replaced job
    int max_json_depth = 64;        // deepest JSON nesting of a body
    int max_backfill_fires = 1000;  // largest window of POST /api/v1/jobs/{id}/backfill
  };
  JobsHandler(Scheduler& scheduler, Coordinator& coordinator, JobCatalog& catalog, JobList& jobs,
              const Reloadable<Quotas>& quotas, Options options)
      : scheduler_(scheduler),
        coordinator_(coordinator),
        catalog_(catalog),
        jobs_(jobs),
        quotas_(quotas),
        options_(std::move(options)) {}
  Response Handle(Call& call) override;

 private:
  Response List(Call& call);
  Response Get(Call& call, const std::string& id);
  Response Action(Call& call, const std::string& id);
  // POST /api/v1/jobs/{id}/backfill {"from", "to", "max_concurrent"}: Scheduler::Backfill.
  Response Backfill(Call& call, const std::string& id);
  Response Define(Call& call, const std::string& id, nlohmann::json body);

  Scheduler& scheduler_;
  Coordinator& coordinator_;
  JobCatalog& catalog_;
  JobList& jobs_;
  const Reloadable<Quotas>& quotas_;
  const Options options_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_API_HANDLERS_H_

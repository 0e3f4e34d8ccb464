// HttpApi: the router of the HTTP API v1 of `gnomon serve` (docs/http-api.md): it matches the
// route, checks that the request is meant for this server and comes from no other origin,
// authenticates the bearer token, checks its role and rate, hands the call to the resource's
// handler (src/server/api_handlers.h) and records mutating calls in the audit log. It is the
// transport-free seam Handle(Request) -> Response; src/server/http_server.h serves it.
//
// Admission, in order (each refusal is JSON, see docs/http-api.md "Errors"):
//   path too long or not printable ASCII (414, 400); no route (404); method (405);
//   Host neither the listen address, an IP literal, localhost nor an [api] allowed_hosts entry
//   (421: DNS rebinding); a foreign Origin or a cross-site Sec-Fetch-Site (403: cross-site
//   requests); a body that is not application/json (415); a missing or unknown token (401); a
//   role too low or a job outside the token's namespaces (403); a mutating call beyond the
//   token's rate (429 with Retry-After).
// Every 401/403 is logged (token name or "unknown", remote address, method, path, reason; at most
// kAuthLogPerSecond lines a second, the rest counted in the next line) and counted in
// gnomon_http_auth_failures_total{reason}. API answers carry Cache-Control: no-store.
//
// Thread safety: Admit and Handle are called by many threads at once; SetTokens and SetQuotas
// (SIGHUP) may run meanwhile: a request uses the tokens it read when it began.
#ifndef GNOMON_SRC_SERVER_HTTP_API_H_
#define GNOMON_SRC_SERVER_HTTP_API_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/job.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/api_handlers.h"
#include "src/server/auth.h"
#include "src/server/http_message.h"
#include "src/server/job_catalog.h"
#include "src/server/job_list.h"
#include "src/server/logger.h"
#include "src/server/metrics.h"
#include "src/server/quota.h"
#include "src/server/rate_limiter.h"
#include "src/server/reloadable.h"

namespace gnomon::server {

// How callers prove who they are.
enum class AuthMode {
  kTokens,  // bearer tokens ([[token]] tables, or the generated admin token)
  kNone,    // nobody: every caller is an anonymous admin (`[api] auth = "none"`, loopback only)
};

// Most auth-failure log lines a second; the others are counted and reported in the next line.
inline constexpr int kAuthLogPerSecond = 20;

struct HttpApiOptions {
  // "host:port" the API listens on: the host is accepted in the Host header. Default
  // "127.0.0.1:8080".
  std::string listen = "127.0.0.1:8080";
  // kNone is refused by Node unless `listen` is a loopback address. Default kTokens.
  AuthMode auth = AuthMode::kTokens;
  // Further host names accepted in the Host header (case-insensitive, without port); "*" accepts
  // any (DNS rebinding is then possible: only behind a proxy that checks Host). Default none.
  std::vector<std::string> allowed_hosts;
  // Largest request body (bytes); larger ones get 413. Default 1 MiB.
  size_t max_body_bytes = 1024 * 1024;
  // Deepest JSON nesting accepted in a body. Default 64.
  int max_json_depth = 64;
  // Most fires (shards counted) one backfill may run; a larger window is a 400. Default 1000.
  int max_backfill_fires = 1000;
  // How old the job list (GET /api/v1/jobs, gnomon_jobs) may be (JobList). Default 1 s.
  Duration job_list_max_age = std::chrono::seconds(1);
  // Reported in the OpenAPI document. Default "0.1.0".
  std::string version = "0.1.0";
  // Applied under the keys of a job created or replaced through the API.
  JobSpec job_defaults;
  // Mutating calls (POST, PUT, DELETE) a token may make a minute on average, and at once; a
  // token's own `mutations_per_minute` replaces the rate. 0 = unlimited. Defaults 600 and 60.
  int mutations_per_minute = 600;
  int mutation_burst = 60;
  // Records read to fill one page of GET /api/v1/runs for a caller limited to namespaces (see
  // src/server/runs_handler.cc). Default 10,000.
  int runs_scan_budget = 10000;
  // Where auth failures are logged. Not owned; null = not logged.
  Logger* logger = nullptr;
  // Source of "now" (cron previews) and of monotonic time (rates, log limits). Not owned;
  // null = SystemClock::Get().
  Clock* clock = nullptr;
};

class HttpApi final : public HttpHandler {
 public:
  // Everything passed must outlive this object. `tokens` must pass ValidateTokens.
  HttpApi(Scheduler& scheduler, Coordinator& coordinator, JobCatalog& catalog,
          MetricsObserver& metrics, HttpApiOptions options, std::vector<ApiToken> tokens = {});
  ~HttpApi() override;
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Replaces the tokens (SIGHUP): InvalidArgument (nothing changes) unless ValidateTokens passes.
  Status SetTokens(std::vector<ApiToken> tokens);
  // Replaces the namespace quotas (SIGHUP).
  void SetQuotas(Quotas quotas);
  // Whether /readyz may answer ready (default true): false while the node is starting.
  void SetReady(bool ready) { probes_.SetReady(ready); }
  // The quotas in force, for the scheduler's admission hook.
  std::shared_ptr<const Quotas> quotas() const { return quotas_.Get(); }

  // HttpHandler. Handle routes, authenticates, authorises and answers one request; never throws.
  std::optional<Response> Admit(const Request& head) override;
  Response Handle(const Request& request) override;

 private:
  struct Route;
  // nullopt = admitted (call.who set), else the answer.
  std::optional<Response> AdmitCall(Call& call, const Route*& route);
  // Logs and counts an auth failure (`call.req`, the answer's status and `reason`).
  void Denied(const Call& call, int status, std::string_view reason);
  void Record(const Call& call, const Response& response);
  Duration SteadyNow() const;

  JobCatalog& catalog_;
  MetricsObserver& metrics_;
  const HttpApiOptions options_;
  std::string listen_host_;  // the host part of options_.listen
  Reloadable<TokenSet> tokens_;
  Reloadable<Quotas> quotas_;
  RateLimiter rates_;
  JobList jobs_;

  ProbesHandler probes_;
  MetricsHandler metrics_handler_;
  AssetsHandler assets_;
  CronHandler cron_;
  NodesHandler nodes_;
  AuditHandler audit_handler_;
  RunsHandler runs_;
  JobsHandler jobs_handler_;
  std::vector<Route> routes_;

  // Auth-failure log lines in the current second, and those left out since the last line.
  std::mutex log_mu_;
  int64_t log_second_ = -1;     // guarded by log_mu_
  int log_lines_ = 0;           // guarded by log_mu_
  int64_t log_suppressed_ = 0;  // guarded by log_mu_
};

// Splits "host:port" / "[v6]:port". InvalidArgument naming `listen`.
Result<std::pair<std::string, int>> ParseListenAddress(std::string_view listen);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_HTTP_API_H_

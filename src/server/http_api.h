// HttpApi: the HTTP API v1 of `gnomon serve` (docs/http-api.md): jobs (read, create, replace,
// delete, pause, resume, trigger), runs, nodes, cron preview, an audit log, health probes,
// Prometheus metrics and an OpenAPI document, behind bearer-token auth. It also serves the
// embedded dashboard (web/, apps/gnomon/web_assets.h) at "/" without a token: the page asks for
// one and sends it to the API.
//
// Hostile input (shared/RELIABILITY.md): request bodies are capped (413, also for chunked bodies,
// counted while streaming), JSON is depth-checked before parsing, unknown/duplicate keys and wrong
// types are 400s naming the field, job ids are checked against [A-Za-z0-9_.-]{1,128}, paths are
// bounded before routing, reads/writes have timeouts and connections a bounded worker pool.
// Exceptions from cpp-httplib and nlohmann::json are caught here and become error responses.
//
// Thread safety: Start/Stop from one owner thread; SyncDynamicJobs and request handlers may run
// concurrently (a mutex serialises changes to dynamic jobs).
#ifndef GNOMON_SRC_SERVER_HTTP_API_H_
#define GNOMON_SRC_SERVER_HTTP_API_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/job.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/server/metrics.h"
#include "src/server/quota.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace gnomon::server {

// What a token may do. Each role includes the ones before it.
enum class TokenRole {
  kRead,     // GETs (jobs, runs, nodes, cron preview, metrics)
  kOperate,  // + pause, resume, trigger
  kAdmin,    // + create, replace, delete job definitions; the audit log
};
std::string_view ToString(TokenRole role);
// "read" | "operate" | "admin".
Result<TokenRole> ParseTokenRole(std::string_view s);

// One `[[token]]` table of the config file (docs/http-api.md "Authentication"):
//   [[token]]
//   name = "ci"                  # who, in the audit log (never the secret)
//   token = "…"                  # the bearer secret, at least 16 characters
//   role = "operate"             # read | operate | admin
//   namespaces = ["billing."]    # job id prefixes this token may see and act on; empty = all
struct ApiToken {
  std::string name;
  std::string token;  // secret: never logged, compared in constant time
  TokenRole role = TokenRole::kRead;
  std::vector<std::string> namespaces;  // job id prefixes; empty = every job
};

// Shortest accepted token secret.
inline constexpr size_t kMinTokenLength = 16;

// Checks names (non-empty, unique), secrets (>= kMinTokenLength printable ASCII, unique) and
// namespaces (non-empty prefixes of valid job ids). Messages name the token by name, never by
// secret.
Status ValidateTokens(const std::vector<ApiToken>& tokens);

// Whether `host` is a loopback address: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(std::string_view host);

struct HttpApiOptions {
  // "host:port" or "[v6]:port"; port 0 = any free port (see HttpApi::port()). Default
  // "127.0.0.1:8080".
  std::string listen = "127.0.0.1:8080";
  // Bearer tokens. Empty = no auth, and then Start refuses a non-loopback listen address.
  std::vector<ApiToken> tokens;
  // Largest request body (bytes); larger ones get 413. Default 1 MiB.
  size_t max_body_bytes = 1024 * 1024;
  // Deepest JSON nesting accepted in a body. Default 64.
  int max_json_depth = 64;
  // Worker threads serving connections. A connection holds its worker while it is kept alive
  // (up to keep_alive_timeout idle, keep_alive_max_count requests), so this is also how many
  // keep-alive clients are served at once: the others wait in the queue. Default 64.
  int threads = 64;
  // Accepted connections waiting for a worker; when full, accepting pauses (the kernel backlog
  // then refuses). Default 64.
  int max_queued_connections = 64;
  // Connections the kernel completes and queues for accept() beyond those; when full, new ones
  // are dropped and their clients retry after a second or more. Capped by the kernel
  // (net.core.somaxconn). Default 512.
  int listen_backlog = 512;
  // Socket read and write timeouts (slow clients). Default 5 s each.
  Duration read_timeout = std::chrono::seconds(5);
  Duration write_timeout = std::chrono::seconds(5);
  // Idle keep-alive connections are closed after this; at most this many requests per
  // connection. Defaults 2 s, 100.
  Duration keep_alive_timeout = std::chrono::seconds(2);
  int keep_alive_max_count = 100;
  // How old the job list (GET /api/v1/jobs, and gnomon_jobs in /metrics) may be: the scheduler's
  // jobs are copied at most once per this interval and the copy is shared by the requests
  // meanwhile (copying 10,000 jobs takes milliseconds under the scheduler's lock). Changes made
  // through this API, and those applied by SyncDynamicJobs, show at once; next_fire, paused and
  // running may lag by up to this. 0 = a fresh copy for every request. Default 1 s.
  Duration job_list_max_age = std::chrono::seconds(1);
  // Reported in gnomon_build_info and the OpenAPI document. Default "0.1.0".
  std::string version = "0.1.0";
  // Applied under the keys of a job created through the API (e.g. ServeConfig::defaults).
  JobSpec job_defaults;
  // Audit records kept in the backend (the newest; older ones are dropped). Default 10000.
  int audit_keep = 10000;
  // Namespace quotas (max jobs on create: 403; max concurrent runs on trigger: 429). Not owned;
  // null = none.
  const Quotas* quotas = nullptr;
  // Source of "now" for audit entries and cron previews. Not owned; null = SystemClock::Get().
  Clock* clock = nullptr;
};

class HttpApi {
 public:
  // `scheduler`, `coordinator` and `metrics` must outlive this object.
  HttpApi(Scheduler& scheduler, Coordinator& coordinator, MetricsObserver& metrics,
          HttpApiOptions options);
  ~HttpApi();  // Stop()
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Validates the options, binds the listen address and serves on its own thread.
  // InvalidArgument: bad listen address or tokens, or no tokens with a non-loopback address.
  // Unavailable: the address cannot be bound. REQUIRES: not started.
  Status Start();
  // Stops accepting, finishes in-flight requests (bounded by the timeouts) and joins. Idempotent.
  void Stop();
  // The bound port (after Start; useful with port 0).
  int port() const { return port_; }

  // Installs into the Scheduler the dynamic job definitions stored in the backend (created on any
  // node), replaces changed ones and removes deleted ones. Idempotent: with no change in the
  // backend it does nothing (cheap: one JobsVersion call). Definitions whose id is a read-only
  // (config-file) job here are ignored. Returns the first error met (the other definitions are
  // still applied). Call it periodically (e.g. every housekeeping interval) and after a reload.
  Status SyncDynamicJobs();
  // The dynamic jobs installed on this node (for a reload: SetJobs(config jobs + these)).
  std::vector<JobSpec> DynamicJobs() const;

  // The cluster's audit log (kept in the backend), newest first: at most `limit` records with
  // seq < before (0 = from the newest).
  Result<std::vector<AuditRecord>> Audit(int limit, int64_t before) const;

  // An HTTP exchange without the transport (the adapter in http_api.cc fills it).
  struct Request {
    std::string method;
    std::string path;
    std::multimap<std::string, std::string> params;  // decoded query parameters
    std::string authorization;                       // the Authorization header
    std::string if_match;                            // the If-Match header
    std::string if_none_match;                       // the If-None-Match header (dashboard)
    std::string body;
  };
  struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  // Routes, authenticates, authorises and answers one request. Never throws.
  Response Handle(const Request& request);

  // Forward declared for http_api.cc.
  struct Principal;
  struct Call;
  struct JobsSnapshot;

 private:
  // Routing, authentication and authorisation without the body: nullopt = admitted, else the
  // error to answer. The adapter calls the first form before reading a request body.
  std::optional<Response> Admit(const Request& request);
  std::optional<Response> Admit(Call& call);
  Response Dispatch(Call& call);
  void Record(const Call& call, const Response& response);
  Instant Now() const;
  // The scheduler's jobs sorted by id, at most job_list_max_age old and taken after the last
  // change through this object (see HttpApiOptions::job_list_max_age).
  std::shared_ptr<const JobsSnapshot> JobsNow();

  Scheduler& scheduler_;
  Coordinator& coordinator_;
  MetricsObserver& metrics_;
  const HttpApiOptions options_;

  // Dynamic jobs installed here: id -> (backend version, spec). Guarded by sync_mu_, which also
  // serialises backend writes of definitions with SyncDynamicJobs.
  mutable std::mutex sync_mu_;
  struct Dynamic {
    int64_t version = 0;
    JobSpec spec;
  };
  std::map<std::string, Dynamic> dynamic_;
  std::optional<int64_t> synced_jobs_version_;

  // The last copy of the scheduler's jobs; snapshot_mu_ is held while a copy is taken, so
  // concurrent requests wait for one copy instead of each making their own.
  std::mutex snapshot_mu_;
  std::shared_ptr<const JobsSnapshot> snapshot_;  // guarded by snapshot_mu_
  // Counts changes to the job set made through this object (mutating calls, SyncDynamicJobs); a
  // snapshot taken before the latest one is not served.
  std::atomic<uint64_t> job_changes_{0};

  // Records the backend could not take yet (it was unreachable), oldest first; retried before
  // the next record is written. Bounded by audit_keep (the oldest are dropped, and counted).
  std::mutex audit_mu_;
  std::deque<AuditRecord> audit_pending_;
  int64_t audit_dropped_ = 0;

  std::unique_ptr<httplib::Server> server_;
  std::jthread thread_;
  std::atomic<bool> listening_done_{false};
  int port_ = 0;
  bool started_ = false;
};

// Splits "host:port" / "[v6]:port". InvalidArgument naming `listen`.
Result<std::pair<std::string, int>> ParseListenAddress(std::string_view listen);

// JSON rendering of the run history without building a json tree (lists of runs are the API's
// hottest path). Each appends to `out` exactly what nlohmann::json's dump() (no indent, no
// ensure_ascii, invalid UTF-8 replaced by U+FFFD) writes for the same value.

// `t` as Instant::ToRfc3339 formats it ("2026-11-29T21:30:00.000Z"), in quotes: a JSON string.
void AppendRfc3339Json(std::string& out, Instant t);
// `s` as a JSON string, in quotes.
void AppendJsonString(std::string& out, std::string_view s);
// One run record: {"attempt", "error", "exit_code", "fencing_token", "finished_at", "job_id",
// "node_id", "outcome", ["output",] "run_id", "scheduled_at", "shard", "shard_count",
// "skip_reason", "started_at"} (keys sorted, as json objects are). finished_at is null while
// running; exit_code null when absent; output only `with_output`.
void AppendRunJson(std::string& out, const RunRecord& r, bool with_output);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_HTTP_API_H_

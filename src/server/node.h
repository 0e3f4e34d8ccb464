// Node: a running gnomon node assembled from options (`gnomon serve`): the backend, the executors,
// the observers (logs, metrics, webhook alerts, OTLP spans), the Scheduler, the JobCatalog with
// its sync loop, the HTTP API and its server. apps/gnomon maps the command line and the config
// files onto NodeOptions and SIGHUP onto Reload; everything else lives here.
//
// Thread safety: Start, Reload and Stop are called from one owner thread.
#ifndef GNOMON_SRC_SERVER_NODE_H_
#define GNOMON_SRC_SERVER_NODE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "src/server/alerts.h"
#include "src/server/auth.h"
#include "src/server/backend.h"
#include "src/server/executor_policy.h"
#include "src/server/http_api.h"
#include "src/server/http_server.h"
#include "src/server/logger.h"
#include "src/server/quota.h"
#include "src/server/tracing.h"

namespace gnomon::server {

struct NodeOptions {
  // Coordination backend URL (src/server/backend.h). Default kDefaultBackendUrl.
  std::string backend = std::string(kDefaultBackendUrl);
  // Start even when the backend fails its safety checks (Redis without persistence). Default false.
  bool allow_unsafe_backend = false;
  // The backend's password when it is not in the URL (from a file or the environment). Secret:
  // never logged. Default empty.
  std::string backend_password;
  // What loading the configuration found worth a warning (a config file others can read, a
  // password on the command line): logged at start. Default none.
  std::vector<std::string> warnings;
  // Where the node keeps its own files (the generated admin token). Default kDefaultDataDir.
  std::string data_dir = std::string(kDefaultDataDir);
  // "all" (claim and run) or "schedule" (queue mode: claimed fires go to Redis streams for
  // `gnomon worker`). Default "all".
  std::string mode = "all";
  // The engine's settings; node_id is required. observer, dispatch, admit and host are set by
  // Node.
  SchedulerOptions scheduler;
  // The API (listen, auth, allowed hosts, body limits, rates). logger and clock are set by Node.
  HttpApiOptions api;
  // The transport's limits; listen is api.listen.
  HttpServerOptions http;
  // Bearer tokens. None (with api.auth = kTokens) = the generated admin token of data_dir.
  std::vector<ApiToken> tokens;
  std::vector<NamespaceQuota> quotas;
  // Executor policies of jobs defined through the API (src/server/executor_policy.h).
  std::vector<ExecutorPolicy> policies;
  std::vector<AlertTarget> alerts;  // webhooks
  std::optional<TracingOptions> tracing;
  // TLS of the node's outgoing HTTP requests (HTTP jobs, webhooks, OTLP export; net::TlsOptions
  // in gnomon/net.h): a CA file instead of the system CAs, a client certificate. Overrides the
  // `tls` of `tracing`. Default: the system CAs, no client certificate.
  TlsOptions http_tls;
  // The static jobs (config and jobs files), compiled.
  std::vector<CompiledJob> jobs;
  // The named calendars (`[[calendar]]`) that jobs defined through the API may reference; read at
  // start. Default none.
  std::shared_ptr<const Calendars> calendars = std::make_shared<const Calendars>();
  LogFormat log_format = LogFormat::kText;
  LogLevel log_level = LogLevel::kInfo;
  std::string version = "0.1.0";
};

// What SIGHUP changes, together or not at all.
struct NodeReload {
  std::vector<CompiledJob> jobs;
  std::vector<ApiToken> tokens;  // none = the generated admin token (re-read: delete it to rotate)
  std::vector<NamespaceQuota> quotas;
  std::vector<ExecutorPolicy> policies;
  std::vector<AlertTarget> alerts;
};

class Node {
 public:
  // Opens the backend, starts the scheduler and serves the API. InvalidArgument for bad options
  // (the message names the option); Unavailable / FailedPrecondition when the backend, the data
  // directory or the listen address cannot be used.
  static Result<std::unique_ptr<Node>> Start(NodeOptions options);
  ~Node();  // Stop()
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Applies a reload all or nothing: everything is checked first; on error nothing changes and
  // the error names what was wrong.
  Status Reload(NodeReload reload);
  // Graceful stop (docs/guarantees.md 9): stops serving and syncing, then stops the scheduler
  // (runs finish or are cancelled after shutdown_grace), then flushes alerts and spans.
  // Idempotent.
  void Stop();

  int port() const;
  int probe_port() const;
  Logger& logger();

 private:
  struct Parts;
  explicit Node(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_NODE_H_

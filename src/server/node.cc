#include "src/server/node.h"

#include <unistd.h>

#include "gnomon/composite_executor.h"
#include "gnomon/http_executor.h"
#include "gnomon/in_process_executor.h"
#include "gnomon/process_executor.h"
#include "gnomon/redis_queue.h"
#include "src/server/admin_token.h"
#include "src/server/api_util.h"
#include "src/server/backend.h"
#include "src/server/job_catalog.h"
#include "src/server/metrics.h"
#include "src/server/queue_payload.h"

namespace gnomon::server {

struct Node::Parts {
  explicit Parts(NodeOptions o)
      : options(std::move(o)),
        log(options.log_format, options.log_level, options.scheduler.node_id),
        http(PolicyHttpOptions(policies, options.http_tls)),
        executor({&process, &http, &in_process}),
        guarded(executor, policies),
        log_observer(log),
        metrics(options.version) {}

  NodeOptions options;
  Logger log;
  std::unique_ptr<Coordinator> coordinator;
  ProcessExecutor process;
  HttpExecutor http;
  InProcessExecutor in_process;
  CompositeExecutor executor;
  Reloadable<Policies> policies{Policies()};
  PolicyGuard guarded;  // executor, behind the executor policies of jobs defined through the API
  LogObserver log_observer;
  MetricsObserver metrics;
  std::unique_ptr<AlertObserver> alerts;
  std::unique_ptr<OtlpExporter> otlp;
  std::unique_ptr<CompositeObserver> observer;
  std::unique_ptr<RedisQueue> queue;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<JobCatalog> catalog;
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<HttpServer> server;
  bool stopped = false;
};

namespace {

// The tokens the API runs with: the configured ones, or the generated admin token.
Result<std::vector<ApiToken>> EffectiveTokens(const NodeOptions& o, std::vector<ApiToken> tokens,
                                              Logger* log) {
  if (o.api.auth == AuthMode::kNone || !tokens.empty()) {
    GNOMON_RETURN_IF_ERROR(ValidateTokens(tokens).WithPrefix("[[token]]"));
    return tokens;
  }
  Result<AdminToken> admin = LoadOrCreateAdminToken(o.data_dir);
  if (!admin.ok()) return admin.status().WithPrefix("data_dir");
  if (admin->created && log != nullptr) {
    log->Info("admin_token_created",
              {{"file", admin->path},
               {"detail",
                "no [[token]] is configured: this admin token (mode 0600) signs in the "
                "dashboard and `gnomon job` on this host"}});
  }
  return std::vector<ApiToken>{ApiToken{kAdminTokenName, admin->secret, TokenRole::kAdmin, {}, 0}};
}

// The address actually bound (the port may have been 0: any free port).
std::string Bound(const std::string& listen, int port) {
  return listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port);
}

}  // namespace

Node::Node(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Node::~Node() { Stop(); }

Result<std::unique_ptr<Node>> Node::Start(NodeOptions options) {
  if (options.scheduler.node_id.empty()) return InvalidArgumentError("node_id: is required");
  if (options.mode != "all" && options.mode != "schedule") {
    return InvalidArgumentError("--mode \"" + options.mode + "\": expected all or schedule");
  }
  Result<std::pair<std::string, int>> listen = ParseListenAddress(options.api.listen);
  if (!listen.ok()) return listen.status();
  if (options.api.auth == AuthMode::kNone && !IsLoopbackHost(listen->first)) {
    return InvalidArgumentError(
        "[api] auth = \"none\" is allowed only on a loopback listen address, not \"" +
        Shown(listen->first) + "\": remove it (a token is then generated) or configure [[token]]");
  }
  GNOMON_RETURN_IF_ERROR(ValidateAlertTargets(options.alerts));
  if (Status s = net::ValidateTlsOptions(options.http_tls); !s.ok()) {
    return s.WithPrefix("[http_client]");
  }
  if (options.tracing) {
    options.tracing->tls = options.http_tls;
    GNOMON_RETURN_IF_ERROR(ValidateTracingOptions(*options.tracing));
  }
  GNOMON_RETURN_IF_ERROR(Quotas::Validate(options.quotas));
  Result<Policies> policies = Policies::Make(options.policies);
  if (!policies.ok()) return policies.status();

  auto p = std::make_unique<Parts>(std::move(options));
  NodeOptions& o = p->options;
  Logger& log = p->log;
  Result<std::vector<ApiToken>> tokens = EffectiveTokens(o, o.tokens, &log);
  if (!tokens.ok()) return tokens.status();
  const bool generated = o.api.auth == AuthMode::kTokens && o.tokens.empty();
  const std::string dashboard_token = generated ? tokens->front().token : "";

  for (const std::string& w : o.warnings)
    log.Log(LogLevel::kWarn, "config_warning", "", "", {{"detail", w}});
  // The URL with its password, when the password comes from elsewhere; logs show o.backend.
  Result<std::string> backend_url = o.backend_password.empty()
                                        ? Result<std::string>(o.backend)
                                        : WithPassword(o.backend, o.backend_password);
  if (!backend_url.ok()) return backend_url.status();
  Result<OpenedBackend> backend = OpenBackend(*backend_url, o.allow_unsafe_backend);
  if (!backend.ok()) return backend.status().WithPrefix("--backend " + RedactUrl(o.backend));
  p->coordinator = std::move(backend->coordinator);
  if (!backend->unsafe.empty()) {
    log.Log(LogLevel::kWarn, "backend_unsafe", "", "",
            {{"backend", RedactUrl(o.backend)}, {"detail", backend->unsafe}});
    p->metrics.SetBackendUnsafe(true);
  }
  if (!backend->unverified_tls.empty()) {
    log.Log(LogLevel::kWarn, "backend_tls_unverified", "", "",
            {{"backend", RedactUrl(o.backend)}, {"detail", backend->unverified_tls}});
  }
  log.Info("backend_opened", {{"backend", RedactUrl(o.backend)}});
  log.Info("process_containment", {{"mechanism", p->process.containment()}});
  Coordinator& coordinator = *p->coordinator;

  // Webhook alerts and OTLP spans: queued, sent from their own threads.
  std::vector<Observer*> observers = {&p->log_observer, &p->metrics};
  // They follow the egress rule of the default [[policy]] (as of the start).
  AlertOptions alert_options;
  alert_options.tls = o.http_tls;
  alert_options.egress = policies->Egress("");
  alert_options.on_given_up = [&log](const std::string& target, const std::string& event,
                                     const std::string& job, const std::string& error) {
    log.Log(LogLevel::kWarn, "alert_failed", job, "",
            {{"alert", target}, {"event", event}, {"error", error}});
  };
  p->alerts = std::make_unique<AlertObserver>(o.alerts, o.scheduler.node_id, alert_options);
  observers.push_back(p->alerts.get());
  if (o.tracing) {
    TracingOptions tracing = *o.tracing;
    tracing.node_id = o.scheduler.node_id;
    tracing.egress = policies->Egress("");
    p->otlp = std::make_unique<OtlpExporter>(tracing, SystemClock::Get());
    observers.push_back(p->otlp.get());
  }
  p->observer = std::make_unique<CompositeObserver>(observers);

  SchedulerOptions so = o.scheduler;
  so.observer = p->observer.get();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  so.host = host;
  so.version = o.version;
  if (o.mode == "schedule") {
    // Queue mode: claimed fires go to the Redis stream of their `queue` tag; workers run them.
    Result<RedisOptions> redis = RedisOptionsFor(*backend_url, o.allow_unsafe_backend);
    Result<std::unique_ptr<RedisQueue>> queue =
        redis.ok() ? RedisQueue::Open(*redis) : Result<std::unique_ptr<RedisQueue>>(redis.status());
    if (!queue.ok()) return queue.status().WithPrefix("--mode schedule");
    p->queue = std::move(*queue);
    RedisQueue* q = p->queue.get();
    so.dispatch = [q](const JobSpec& job, const Claim& claim) {
      return q->Publish(job.queue, EncodeQueuedFire(job, claim));
    };
  }
  // Quotas are reloadable: each fire asks the ones in force (none: an empty answer at once).
  Parts* parts = p.get();
  so.admit = [parts](const JobSpec& job, const Claim& claim) {
    return parts->api->quotas()->Admit(job, claim);
  };
  p->policies.Set(std::move(*policies));
  p->scheduler = std::make_unique<Scheduler>(so, coordinator, p->guarded, SystemClock::Get());
  JobCatalogOptions catalog_options;
  catalog_options.job_defaults = o.api.job_defaults;
  catalog_options.calendars = o.calendars;
  catalog_options.max_json_depth = o.api.max_json_depth;
  p->catalog =
      std::make_unique<JobCatalog>(*p->scheduler, coordinator, catalog_options, p->policies);
  GNOMON_RETURN_IF_ERROR(p->catalog->SetStaticJobs(o.jobs));

  HttpApiOptions api_options = o.api;
  api_options.logger = &log;
  api_options.version = o.version;
  p->api = std::make_unique<HttpApi>(*p->scheduler, coordinator, *p->catalog, p->metrics,
                                     api_options, std::move(*tokens));
  Result<Quotas> quotas = Quotas::Make(o.quotas, coordinator);
  if (!quotas.ok()) return quotas.status();
  quotas->Bind(p->scheduler.get(), p->catalog.get());
  p->api->SetQuotas(std::move(*quotas));
  HttpServerOptions http = o.http;
  http.listen = o.api.listen;
  http.max_body_bytes = o.api.max_body_bytes;
  p->server = std::make_unique<HttpServer>(*p->api, http);
  // Not ready until the engine runs the jobs defined through the API: before that, a GET of
  // such a job would answer 404.
  p->api->SetReady(false);
  GNOMON_RETURN_IF_ERROR(p->server->Start().WithPrefix("--listen " + o.api.listen));

  // Jobs other nodes created through the API, then the engine, then the sync loop.
  if (Status s = p->catalog->Sync(); !s.ok()) log.Error("sync_failed", {{"error", s.message()}});
  GNOMON_RETURN_IF_ERROR(p->scheduler->Start());
  p->catalog->StartSync([&log](const Status& s) {
    log.Error("sync_failed", {{"error", s.message()}});
  });
  p->api->SetReady(true);

  const std::string bound = Bound(o.api.listen, p->server->port());
  const std::string base = (o.http.tls_cert.empty() ? "http://" : "https://") + bound;
  Logger::Fields listening = {
      {"listen", bound}, {"api", base + "/api/v1/jobs"}, {"metrics", base + "/metrics"}};
  if (!o.http.tls_cert.empty()) {
    listening.emplace_back("tls", o.http.client_ca.empty() ? "on" : "mutual (client_ca)");
  }
  if (o.api.auth == AuthMode::kNone) {
    listening.emplace_back("auth", "none");
    log.Log(LogLevel::kWarn, "auth_disabled", "", "",
            {{"detail",
              "[api] auth = \"none\": every local user and every page on this host "
              "can create and run commands; use it for experiments only"}});
  } else if (generated) {
    listening.emplace_back("auth",
                           "generated admin token (" + o.data_dir + "/" + kAdminTokenFile + ")");
    // The fragment never reaches a server or a Referer; the page keeps it for the session.
    listening.emplace_back("dashboard", base + "/#token=" + dashboard_token);
  } else {
    listening.emplace_back("auth", "bearer tokens");
  }
  if (p->server->probe_port() > 0) {
    listening.emplace_back("probes", Bound(o.http.probe_listen, p->server->probe_port()));
  }
  log.Info("http_listening", listening);
  log.Info("started", {{"jobs", std::to_string(o.jobs.size())},
                       {"backend", RedactUrl(o.backend)},
                       {"mode", o.mode}});
  for (const JobView& j : p->scheduler->Jobs()) {
    log.Log(LogLevel::kInfo, "job_loaded", j.spec.id, "",
            {{"schedule", j.spec.schedule},
             {"timezone", j.spec.timezone},
             {"source", j.spec.source},
             {"next_fire", j.next_fire ? j.next_fire->ToRfc3339() : "never"}});
  }
  return std::unique_ptr<Node>(new Node(std::move(p)));
}

Status Node::Reload(NodeReload reload) {
  Parts& p = *parts_;
  // Check everything first.
  GNOMON_RETURN_IF_ERROR(p.catalog->CheckStaticJobs(reload.jobs));
  Result<std::vector<ApiToken>> tokens =
      EffectiveTokens(p.options, std::move(reload.tokens), &p.log);
  if (!tokens.ok()) return tokens.status();
  Result<Quotas> quotas = Quotas::Make(std::move(reload.quotas), *p.coordinator);
  if (!quotas.ok()) return quotas.status();
  quotas->Bind(p.scheduler.get(), p.catalog.get());
  GNOMON_RETURN_IF_ERROR(ValidateAlertTargets(reload.alerts));
  Result<Policies> policies = Policies::Make(std::move(reload.policies));
  if (!policies.ok()) return policies.status();
  // Then apply: the API's certificate files re-read (a renewal; on error the old ones stay and
  // nothing changes), the jobs (the last step that can fail), then the rest.
  if (!p.options.http.tls_cert.empty()) {
    GNOMON_RETURN_IF_ERROR(p.server->ReloadCertificates());
  }
  GNOMON_RETURN_IF_ERROR(p.catalog->SetStaticJobs(std::move(reload.jobs)));
  GNOMON_CHECK(p.api->SetTokens(std::move(*tokens)).ok());
  p.api->SetQuotas(std::move(*quotas));
  p.policies.Set(std::move(*policies));
  GNOMON_CHECK(p.alerts->SetTargets(std::move(reload.alerts)).ok());
  return Status::Ok();
}

void Node::Stop() {
  if (parts_ == nullptr || parts_->stopped) return;
  Parts& p = *parts_;
  p.stopped = true;
  if (p.server) p.server->Stop();
  if (p.catalog) p.catalog->StopSync();
  if (p.scheduler) p.scheduler->Stop();
  // Alerts and spans of the last runs are sent (bounded) before the process exits.
  if (p.alerts) p.alerts->Stop();
  if (p.otlp) p.otlp->Stop();
  p.log.Info("stopped");
}

int Node::port() const { return parts_->server->port(); }
int Node::probe_port() const { return parts_->server->probe_port(); }
Logger& Node::logger() { return parts_->log; }

}  // namespace gnomon::server

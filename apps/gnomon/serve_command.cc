// `gnomon serve`: the daemon. Loads the config and jobs, opens the backend, runs the scheduler,
// reloads jobs on SIGHUP (running runs keep their definition) and stops gracefully on
// SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "apps/gnomon/commands.h"
#include "apps/gnomon/config.h"
#include "apps/gnomon/http_api.h"
#include "apps/gnomon/logger.h"
#include "apps/gnomon/metrics.h"
#include "gnomon/composite_executor.h"
#include "gnomon/etcd_coordinator.h"
#include "gnomon/http_executor.h"
#include "gnomon/in_process_executor.h"
#include "gnomon/process_executor.h"
#include "gnomon/redis_coordinator.h"
#include "gnomon/scheduler.h"
#include "gnomon/sqlite_coordinator.h"

namespace gnomon::app {
namespace {

struct ServeArgs {
  std::string config;
  std::string backend;
  std::string node_id;
  std::string listen;
  std::vector<std::string> jobs;
  std::vector<std::string> crontabs;
};

std::string DefaultNodeId() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string id;
  for (char c : std::string(host)) {
    id += IsValidJobId(std::string(1, c)) ? c : '-';
  }
  if (id.empty()) id = "node";
  return id.substr(0, 100) + "-" + std::to_string(getpid());
}

// The config from files and flags; all-or-nothing.
Result<ServeConfig> Load(const ServeArgs& args) {
  ServeConfig config;
  if (!args.config.empty()) {
    Result<ServeConfig> loaded = LoadServeConfig(args.config);
    if (!loaded.ok()) return loaded.status();
    config = std::move(*loaded);
  }
  if (!args.backend.empty()) config.backend = args.backend;
  if (!args.node_id.empty()) config.node_id = args.node_id;
  if (!args.listen.empty()) config.listen = args.listen;
  if (config.node_id.empty()) config.node_id = DefaultNodeId();
  GNOMON_RETURN_IF_ERROR(AddJobFiles(&config, args.jobs, args.crontabs));
  GNOMON_RETURN_IF_ERROR(ValidateServeConfig(config));
  return config;
}

Result<std::unique_ptr<Coordinator>> OpenBackend(const ServeConfig& config, Logger& log) {
  Result<BackendUrl> url = ParseBackendUrl(config.backend);
  if (!url.ok()) return url.status().WithPrefix("--backend");
  if (url->scheme == "redis" || url->scheme == "redis+sentinel") {
    RedisOptions base;
    base.allow_unsafe = config.allow_unsafe_backend;
    Result<RedisOptions> options = base;
    if (url->scheme == "redis") {
      options = ParseRedisUrl(config.backend, base);
    } else {
      // redis+sentinel://[user:pass@]h1:p,h2:p/master: the primary comes from the sentinels.
      for (const HostPort& h : url->hosts) options->sentinels.emplace_back(h.host, h.port);
      options->sentinel_master = url->master;
      options->user = url->user;
      options->password = url->password;
      options->db = url->db;
    }
    if (!options.ok()) return options.status().WithPrefix("--backend");
    Result<std::unique_ptr<RedisCoordinator>> redis = RedisCoordinator::Open(*options);
    if (!redis.ok()) return redis.status();
    if ((*redis)->unsafe_persistence()) {
      log.Log(LogLevel::kWarn, "backend_unsafe", "", "",
              {{"backend", RedactUrl(config.backend)},
               {"detail",
                "the Redis server does not have appendonly yes: a restart can lose "
                "claims (allow_unsafe_backend = true)"}});
    }
    log.Info("backend_opened", {{"backend", RedactUrl(config.backend)}});
    return std::unique_ptr<Coordinator>(std::move(*redis));
  }
  if (url->scheme == "etcd") {
    Result<EtcdOptions> options = ParseEtcdUrl(config.backend);
    if (!options.ok()) return options.status().WithPrefix("--backend");
    Result<std::unique_ptr<EtcdCoordinator>> etcd = EtcdCoordinator::Open(*options);
    if (!etcd.ok()) return etcd.status();
    log.Info("backend_opened", {{"backend", RedactUrl(config.backend)}});
    return std::unique_ptr<Coordinator>(std::move(*etcd));
  }
  if (url->scheme != "sqlite") {
    return InvalidArgumentError("--backend " + RedactUrl(config.backend) + ": unknown scheme " +
                                url->scheme);
  }
  const std::filesystem::path path(url->path);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    return UnavailableError("cannot create " + path.parent_path().string() + ": " + ec.message());
  }
  Result<std::unique_ptr<SqliteCoordinator>> db =
      SqliteCoordinator::Open(url->path, SystemClock::Get());
  if (!db.ok()) return db.status();
  log.Info("backend_opened", {{"backend", RedactUrl(config.backend)}});
  return std::unique_ptr<Coordinator>(std::move(*db));
}

SchedulerOptions SchedulerOptionsFor(const ServeConfig& config, Observer* observer) {
  SchedulerOptions o;
  o.node_id = config.node_id;
  o.claim_grace = config.scheduler.claim_grace;
  o.skew_tolerance = config.scheduler.skew_tolerance;
  o.lease_ttl = config.scheduler.lease_ttl;
  o.worker_threads = config.scheduler.worker_threads;
  o.shutdown_grace = config.scheduler.shutdown_grace;
  o.housekeeping_interval = config.scheduler.heartbeat_interval;
  o.observer = observer;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  o.host = host;
  return o;
}

// The config's [[token]] tables as API tokens, checked.
Result<std::vector<ApiToken>> Tokens(const ServeConfig& config) {
  std::vector<ApiToken> tokens;
  for (const TokenConfig& t : config.tokens) {
    Result<TokenRole> role = ParseTokenRole(t.role);
    if (!role.ok()) return role.status().WithPrefix(t.source + ": token \"" + t.name + "\"");
    tokens.push_back(ApiToken{t.name, t.secret, *role, t.namespaces});
  }
  GNOMON_RETURN_IF_ERROR(ValidateTokens(tokens));
  return tokens;
}

int RunServe(const ServeArgs& args) {
  // Signals are taken synchronously by this thread (sigwait); every thread started from here on
  // inherits the mask (child processes get theirs reset by the process executor).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Result<ServeConfig> config = Load(args);
  if (!config.ok()) {
    std::cerr << "gnomon serve: " << config.status().message() << "\n";
    return kExitUsage;
  }
  Logger log(config->log_format, config->log_level, config->node_id);
  Result<std::unique_ptr<Coordinator>> coord = OpenBackend(*config, log);
  if (!coord.ok()) {
    log.Error("backend_failed", {{"error", coord.status().message()}});
    std::cerr << "gnomon serve: " << coord.status().message() << "\n";
    return coord.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  ProcessExecutor process;
  HttpExecutor http;
  InProcessExecutor in_process;
  CompositeExecutor executor({&process, &http, &in_process});
  Result<std::vector<ApiToken>> tokens = Tokens(*config);
  if (!tokens.ok()) {
    std::cerr << "gnomon serve: " << tokens.status().message() << "\n";
    return kExitUsage;
  }
  LogObserver log_observer(log);
  MetricsObserver metrics("0.1.0");
  if (const auto* redis = dynamic_cast<const RedisCoordinator*>(coord->get())) {
    metrics.SetBackendUnsafe(redis->unsafe_persistence());
  }
  CompositeObserver observer({&log_observer, &metrics});
  std::vector<NamespaceQuota> quota_list;
  for (const QuotaConfig& q : config->quotas) {
    quota_list.push_back(NamespaceQuota{q.ns, q.max_jobs, q.max_concurrent_runs});
  }
  Result<Quotas> quotas = Quotas::Make(std::move(quota_list), **coord);
  if (!quotas.ok()) {
    std::cerr << "gnomon serve: " << quotas.status().message() << "\n";
    return kExitUsage;
  }
  SchedulerOptions scheduler_options = SchedulerOptionsFor(*config, &observer);
  if (!config->quotas.empty()) {
    scheduler_options.admit = [&quotas](const JobSpec& job, const Claim& claim) {
      return quotas->Admit(job, claim);
    };
  }
  Scheduler scheduler(scheduler_options, **coord, executor, SystemClock::Get());
  quotas->Bind(&scheduler);
  if (Status s = scheduler.SetJobs(config->jobs); !s.ok()) {
    std::cerr << "gnomon serve: " << s.message() << "\n";
    return kExitUsage;
  }
  HttpApiOptions api_options;
  api_options.listen = config->listen;
  api_options.tokens = *tokens;
  api_options.job_defaults = config->defaults;
  api_options.quotas = &*quotas;
  HttpApi api(scheduler, **coord, metrics, api_options);
  if (Status s = api.Start(); !s.ok()) {
    std::cerr << "gnomon serve: --listen " << config->listen << ": " << s.message() << "\n";
    return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  // Jobs other nodes created through the API.
  if (Status s = api.SyncDynamicJobs(); !s.ok()) log.Error("sync_failed", {{"error", s.message()}});
  if (Status s = scheduler.Start(); !s.ok()) {
    std::cerr << "gnomon serve: " << s.message() << "\n";
    return kExitFailure;
  }
  // The address actually bound (the port may have been 0: any free port).
  const std::string bound =
      config->listen.substr(0, config->listen.rfind(':')) + ":" + std::to_string(api.port());
  log.Info("http_listening", {{"listen", bound},
                              {"auth", tokens->empty() ? "none (loopback only)" : "bearer tokens"},
                              {"api", "http://" + bound + "/api/v1/jobs"},
                              {"metrics", "http://" + bound + "/metrics"}});
  log.Info("started", {{"jobs", std::to_string(config->jobs.size())},
                       {"backend", RedactUrl(config->backend)}});
  for (const JobView& j : scheduler.Jobs()) {
    log.Log(LogLevel::kInfo, "job_loaded", j.spec.id, "",
            {{"schedule", j.spec.schedule},
             {"timezone", j.spec.timezone},
             {"source", j.spec.source},
             {"next_fire", j.next_fire ? j.next_fire->ToRfc3339() : "never"}});
  }
  // Jobs other nodes define through the API: a watcher thread waits for the backend to announce
  // a change (Redis pub/sub, etcd watch; polling on SQLite) and syncs at once. Its wait ends at
  // least every second, and every pass compares JobsVersion, so a missed notification is healed
  // within a second.
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool stopping = false;
  std::thread watcher([&] {
    int64_t seen = -1;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(watch_mu);
        if (stopping) return;
      }
      Result<int64_t> v = (*coord)->WaitJobsChange(seen, std::chrono::seconds(1));
      Status s = v.ok() ? api.SyncDynamicJobs() : v.status();
      if (s.ok()) {
        seen = *v;
        continue;
      }
      log.Error("sync_failed", {{"error", s.message()}});
      std::unique_lock<std::mutex> lock(watch_mu);
      SystemClock::Get().WaitFor(lock, watch_cv, std::chrono::seconds(1), [&] { return stopping; });
    }
  });
  // The main thread waits for signals.
  while (true) {
    const int sig = sigwaitinfo(&signals, nullptr);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGHUP) {
      log.Info("stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      break;
    }
    // Reload: all-or-nothing; on error the running set stays.
    Result<ServeConfig> fresh = Load(args);
    std::vector<JobSpec> jobs;
    if (fresh.ok()) {
      jobs = fresh->jobs;
      for (JobSpec& j : api.DynamicJobs()) jobs.push_back(std::move(j));
    }
    Status s = fresh.ok() ? scheduler.SetJobs(jobs) : fresh.status();
    if (s.ok()) {
      log.Info("jobs_reloaded", {{"jobs", std::to_string(fresh->jobs.size())}});
    } else {
      log.Error("reload_failed", {{"error", s.message()}});
    }
  }
  {
    std::lock_guard<std::mutex> lock(watch_mu);
    stopping = true;
  }
  watch_cv.notify_all();
  watcher.join();
  api.Stop();
  scheduler.Stop();
  log.Info("stopped");
  return kExitOk;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand("serve", "Run the gnomon daemon (scheduler node)");
  serve->add_option("--config", args->config, "Config file (TOML); see docs/configuration.md");
  serve->add_option("--backend", args->backend,
                    "Coordination backend URL (default sqlite://./gnomon-data/gnomon.db)");
  serve->add_option("--node-id", args->node_id, "This node's id (default <hostname>-<pid>)");
  serve->add_option("--listen", args->listen, "HTTP listen address (default 127.0.0.1:8080)");
  serve->add_option("--jobs", args->jobs, "Jobs file (TOML); may be repeated");
  serve->add_option("--crontab", args->crontabs, "Import a standard crontab file; may be repeated");
  serve->callback([args, exit_code] { *exit_code = RunServe(*args); });
}

}  // namespace gnomon::app

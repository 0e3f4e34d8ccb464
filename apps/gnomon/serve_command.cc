// `gnomon serve`: the daemon. Loads the config and jobs, opens the backend, runs the scheduler,
// reloads jobs on SIGHUP (running runs keep their definition) and stops gracefully on
// SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "apps/gnomon/commands.h"
#include "apps/gnomon/config.h"
#include "gnomon/composite_executor.h"
#include "gnomon/etcd_coordinator.h"
#include "gnomon/http_executor.h"
#include "gnomon/in_process_executor.h"
#include "gnomon/process_executor.h"
#include "gnomon/redis_coordinator.h"
#include "gnomon/redis_queue.h"
#include "gnomon/scheduler.h"
#include "gnomon/sqlite_coordinator.h"
#include "src/server/alerts.h"
#include "src/server/http_api.h"
#include "src/server/logger.h"
#include "src/server/metrics.h"
#include "src/server/queue_payload.h"
#include "src/server/tracing.h"

namespace gnomon::app {
namespace {

using server::AlertObserver;
using server::AlertTarget;
using server::ApiToken;
using server::CompositeObserver;
using server::DecodeQueuedFire;
using server::EncodeQueuedFire;
using server::HttpApi;
using server::HttpApiOptions;
using server::Logger;
using server::LogObserver;
using server::MetricsObserver;
using server::NamespaceQuota;
using server::OtlpExporter;
using server::ParseTokenRole;
using server::QueuedFire;
using server::Quotas;
using server::TokenRole;
using server::TracingOptions;
using server::ValidateAlertTargets;
using server::ValidateTokens;
using server::ValidateTracingOptions;

struct ServeArgs {
  std::string config;
  std::string backend;
  std::string node_id;
  std::string listen;
  std::vector<std::string> jobs;
  std::vector<std::string> crontabs;
  std::string mode = "all";  // all | schedule (queue mode: workers run the fires)
};

struct WorkerArgs {
  std::string config;
  std::string backend;
  std::string node_id;
  int concurrency = 4;
  std::vector<std::string> tags = {"default"};
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

// The Redis options of a redis:// or redis+sentinel:// backend URL.
Result<RedisOptions> RedisOptionsFor(const ServeConfig& config) {
  Result<BackendUrl> url = ParseBackendUrl(config.backend);
  if (!url.ok()) return url.status().WithPrefix("--backend");
  RedisOptions base;
  base.allow_unsafe = config.allow_unsafe_backend;
  if (url->scheme == "redis") return ParseRedisUrl(config.backend, base);
  if (url->scheme != "redis+sentinel") {
    return InvalidArgumentError("--backend " + RedactUrl(config.backend) +
                                ": queue mode needs a Redis backend (redis:// or "
                                "redis+sentinel://)");
  }
  // redis+sentinel://[user:pass@]h1:p,h2:p/master: the primary comes from the sentinels.
  for (const HostPort& h : url->hosts) base.sentinels.emplace_back(h.host, h.port);
  base.sentinel_master = url->master;
  base.user = url->user;
  base.password = url->password;
  base.db = url->db;
  return base;
}

Result<std::unique_ptr<Coordinator>> OpenBackend(const ServeConfig& config, Logger& log) {
  Result<BackendUrl> url = ParseBackendUrl(config.backend);
  if (!url.ok()) return url.status().WithPrefix("--backend");
  if (url->scheme == "redis" || url->scheme == "redis+sentinel") {
    Result<RedisOptions> options = RedisOptionsFor(config);
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
  o.claim_ahead = config.scheduler.claim_ahead;
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
  // Webhook alerts and OTLP spans: queued, sent from their own threads.
  std::vector<Observer*> observers = {&log_observer, &metrics};
  std::unique_ptr<AlertObserver> alerts;
  if (!config->alerts.empty()) {
    std::vector<AlertTarget> targets;
    for (const AlertConfig& a : config->alerts) {
      targets.push_back(AlertTarget{a.name, a.url, a.secret, a.events, a.jobs});
    }
    if (Status s = ValidateAlertTargets(targets); !s.ok()) {
      std::cerr << "gnomon serve: " << s.message() << "\n";
      return kExitUsage;
    }
    alerts = std::make_unique<AlertObserver>(std::move(targets), config->node_id);
    observers.push_back(alerts.get());
  }
  std::unique_ptr<OtlpExporter> otlp;
  if (!config->tracing.otlp_endpoint.empty()) {
    TracingOptions tracing;
    tracing.endpoint = config->tracing.otlp_endpoint;
    tracing.service_name = config->tracing.service_name;
    tracing.node_id = config->node_id;
    if (Status s = ValidateTracingOptions(tracing); !s.ok()) {
      std::cerr << "gnomon serve: " << s.message() << "\n";
      return kExitUsage;
    }
    otlp = std::make_unique<OtlpExporter>(tracing, SystemClock::Get());
    observers.push_back(otlp.get());
  }
  CompositeObserver observer(observers);
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
  // Queue mode: claimed fires go to the Redis stream of their `queue` tag; workers run them.
  std::unique_ptr<RedisQueue> queue;
  if (args.mode == "schedule") {
    Result<RedisOptions> redis = RedisOptionsFor(*config);
    Result<std::unique_ptr<RedisQueue>> opened =
        redis.ok() ? RedisQueue::Open(*redis) : Result<std::unique_ptr<RedisQueue>>(redis.status());
    if (!opened.ok()) {
      std::cerr << "gnomon serve: --mode schedule: " << opened.status().message() << "\n";
      return opened.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    queue = std::move(*opened);
    scheduler_options.dispatch = [&queue](const JobSpec& job, const Claim& claim) {
      return queue->Publish(job.queue, EncodeQueuedFire(job, claim));
    };
  } else if (args.mode != "all") {
    std::cerr << "gnomon serve: --mode \"" << args.mode << "\": expected all or schedule\n";
    return kExitUsage;
  }
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
                       {"backend", RedactUrl(config->backend)},
                       {"mode", args.mode}});
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
  // Alerts and spans of the last runs are sent (bounded) before the process exits.
  if (alerts) alerts->Stop();
  if (otlp) otlp->Stop();
  log.Info("stopped");
  return kExitOk;
}

// `gnomon worker`: takes queued fires (queue mode) from the Redis streams of its tags and runs
// them with the engine's lease watchdog, timeouts, retries and fenced reports (Scheduler::
// RunClaim). An entry is acknowledged (and deleted) once its fire's outcome is reported, or at
// once when its claim is stale (the renew is refused: the fire was resolved elsewhere). While a
// run lasts its entry is touched every lease_ttl/3, so only a dead worker's entries are
// reclaimed by the others (after 2 x lease_ttl).
int RunWorker(const WorkerArgs& args) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ServeArgs serve_args;
  serve_args.config = args.config;
  serve_args.backend = args.backend;
  serve_args.node_id = args.node_id;
  Result<ServeConfig> config = Load(serve_args);
  if (!config.ok()) {
    std::cerr << "gnomon worker: " << config.status().message() << "\n";
    return kExitUsage;
  }
  if (args.concurrency < 1 || args.concurrency > 10000) {
    std::cerr << "gnomon worker: --concurrency " << args.concurrency
              << " is out of range 1-10000\n";
    return kExitUsage;
  }
  for (const std::string& tag : args.tags) {
    JobSpec probe;
    probe.id = "probe";
    probe.schedule = "@daily";
    probe.command = "true";
    probe.queue = tag;
    if (Status s = ValidateJobSpec(probe); !s.ok()) {
      std::cerr << "gnomon worker: --tags \"" << tag << "\": must match [A-Za-z0-9_.-]{1,64}\n";
      return kExitUsage;
    }
  }
  Logger log(config->log_format, config->log_level, config->node_id);
  Result<RedisOptions> redis = RedisOptionsFor(*config);
  if (!redis.ok()) {
    std::cerr << "gnomon worker: " << redis.status().message() << "\n";
    return kExitUsage;
  }
  Result<std::unique_ptr<Coordinator>> coord = OpenBackend(*config, log);
  Result<std::unique_ptr<RedisQueue>> queue =
      coord.ok() ? RedisQueue::Open(*redis) : Result<std::unique_ptr<RedisQueue>>(coord.status());
  if (!queue.ok()) {
    log.Error("backend_failed", {{"error", queue.status().message()}});
    std::cerr << "gnomon worker: " << queue.status().message() << "\n";
    return kExitFailure;
  }
  ProcessExecutor process;
  HttpExecutor http;
  InProcessExecutor in_process;
  CompositeExecutor executor({&process, &http, &in_process});
  LogObserver log_observer(log);
  SchedulerOptions options = SchedulerOptionsFor(*config, &log_observer);
  options.worker_threads = args.concurrency;
  options.heartbeat = false;
  Scheduler scheduler(options, **coord, executor, SystemClock::Get());
  if (Status s = scheduler.Start(); !s.ok()) {
    std::cerr << "gnomon worker: " << s.message() << "\n";
    return kExitFailure;
  }
  std::string tags;
  for (const std::string& t : args.tags) tags += (tags.empty() ? "" : ",") + t;
  log.Info("worker_started", {{"backend", RedactUrl(config->backend)},
                              {"tags", tags},
                              {"concurrency", std::to_string(args.concurrency)}});

  const Duration ttl = config->scheduler.lease_ttl;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::map<std::string, QueueEntry> inflight;  // by entry id; guarded by mu
  std::thread taker([&] {
    Duration last_touch = SystemClock::Get().SteadyNow();
    while (true) {
      int free = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        SystemClock::Get().WaitFor(lock, cv, std::chrono::milliseconds(200), [&] {
          return stopping || static_cast<int>(inflight.size()) < args.concurrency;
        });
        if (stopping) return;
        free = args.concurrency - static_cast<int>(inflight.size());
        if (SystemClock::Get().SteadyNow() - last_touch >= ttl / 3) {
          std::vector<QueueEntry> mine;
          for (const auto& [id, e] : inflight) mine.push_back(e);
          lock.unlock();
          if (Status t = (*queue)->Touch(mine, config->node_id); !t.ok()) {
            log.Error("queue_touch_failed", {{"error", t.message()}});
          }
          last_touch = SystemClock::Get().SteadyNow();
        }
      }
      if (free <= 0) continue;
      Result<std::vector<QueueEntry>> taken =
          (*queue)->Take(args.tags, config->node_id, free, std::chrono::seconds(1), 2 * ttl);
      if (!taken.ok()) {
        log.Error("queue_take_failed", {{"error", taken.status().message()}});
        std::unique_lock<std::mutex> lock(mu);
        SystemClock::Get().WaitFor(lock, cv, std::chrono::seconds(1), [&] { return stopping; });
        continue;
      }
      for (QueueEntry& e : *taken) {
        Result<QueuedFire> fire = DecodeQueuedFire(e.payload);
        if (!fire.ok()) {
          log.Error("queue_entry_invalid", {{"entry", e.id}, {"error", fire.status().message()}});
          (void)(*queue)->Done(e);
          continue;
        }
        const std::string run_id = fire->claim.fire.RunId();
        const Duration renew_sent = SystemClock::Get().SteadyNow();
        Status renewed = (**coord).Renew(fire->claim, ttl);
        if (renewed.code() == StatusCode::kUnavailable) {
          // The backend is unreachable: leave the entry pending; it is retried or reclaimed.
          log.Error("queue_renew_failed", {{"entry", e.id}, {"error", renewed.message()}});
          continue;
        }
        if (!renewed.ok()) {
          // Stale: resolved elsewhere (lost run handled, or a second delivery): never run twice.
          log.Log(LogLevel::kInfo, "queue_entry_stale", fire->job.id, run_id,
                  {{"entry", e.id},
                   {"reclaimed", e.reclaimed ? "true" : "false"},
                   {"detail", renewed.message()}});
          (void)(*queue)->Done(e);
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          inflight[e.id] = e;
        }
        Status started = scheduler.RunClaim(fire->job, fire->claim, renew_sent, [&, e] {
          if (Status d = (*queue)->Done(e); !d.ok()) {
            log.Error("queue_ack_failed", {{"entry", e.id}, {"error", d.message()}});
          }
          std::lock_guard<std::mutex> lock(mu);
          inflight.erase(e.id);
          cv.notify_all();
        });
        if (!started.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          inflight.erase(e.id);  // stopping: left pending for another worker
        }
      }
    }
  });
  while (true) {
    const int sig = sigwaitinfo(&signals, nullptr);
    if (sig < 0) continue;
    log.Info("stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  taker.join();
  scheduler.Stop();  // runs finish (or are cancelled after shutdown_grace) and are reported
  log.Info("stopped");
  return kExitOk;
}

}  // namespace

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<WorkerArgs>();
  CLI::App* worker =
      app.add_subcommand("worker", "Run queued fires (queue mode: gnomon serve --mode schedule)");
  worker->add_option("--config", args->config, "Config file (TOML): backend, [scheduler], logs");
  worker->add_option("--backend", args->backend,
                     "Redis backend URL (redis:// or redis+sentinel://)");
  worker->add_option("--node-id", args->node_id, "This worker's id (default <hostname>-<pid>)");
  worker->add_option("--concurrency", args->concurrency, "Runs at once (default 4)");
  worker->add_option("--tags", args->tags, "Queue tags to take (default: default)")->delimiter(',');
  worker->callback([args, exit_code] { *exit_code = RunWorker(*args); });
}

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
  serve->add_option("--mode", args->mode,
                    "all (default: claim and run) or schedule (queue mode: claim and publish to "
                    "Redis streams for `gnomon worker`)");
  serve->callback([args, exit_code] { *exit_code = RunServe(*args); });
}

}  // namespace gnomon::app

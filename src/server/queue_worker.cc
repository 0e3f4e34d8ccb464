#include "src/server/queue_worker.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "gnomon/composite_executor.h"
#include "gnomon/http_executor.h"
#include "gnomon/in_process_executor.h"
#include "gnomon/process_executor.h"
#include "gnomon/redis_queue.h"
#include "src/server/backend.h"
#include "src/server/queue_payload.h"

namespace gnomon::server {

struct QueueWorker::Parts {
  explicit Parts(QueueWorkerOptions o)
      : options(std::move(o)),
        log(options.log_format, options.log_level, options.scheduler.node_id),
        http(PolicyHttpOptions(policies, options.http_tls)),
        executor({&process, &http, &in_process}),
        guarded(executor, policies),
        log_observer(log) {}

  QueueWorkerOptions options;
  Logger log;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<RedisQueue> queue;
  ProcessExecutor process;
  HttpExecutor http;
  InProcessExecutor in_process;
  CompositeExecutor executor;
  Reloadable<Policies> policies{Policies()};
  PolicyGuard guarded;  // executor, behind the policies of jobs defined through the API
  LogObserver log_observer;
  std::unique_ptr<Scheduler> scheduler;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                       // guarded by mu
  std::map<std::string, QueueEntry> inflight;  // by entry id; guarded by mu
  std::jthread taker;
  bool stopped = false;
};

QueueWorker::QueueWorker(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

QueueWorker::~QueueWorker() { Stop(); }

Result<std::unique_ptr<QueueWorker>> QueueWorker::Start(QueueWorkerOptions options) {
  if (options.scheduler.node_id.empty()) return InvalidArgumentError("node_id: is required");
  if (options.concurrency < 1 || options.concurrency > 10000) {
    return InvalidArgumentError("--concurrency " + std::to_string(options.concurrency) +
                                " is out of range 1-10000");
  }
  for (const std::string& tag : options.tags) {
    JobSpec probe;
    probe.id = "probe";
    probe.schedule = "@daily";
    probe.command = "true";
    probe.queue = tag;
    if (!ValidateJobSpec(probe).ok()) {
      return InvalidArgumentError("--tags \"" + tag + "\": must match [A-Za-z0-9_.-]{1,64}");
    }
  }
  Result<std::string> url = options.backend_password.empty()
                                ? Result<std::string>(options.backend)
                                : WithPassword(options.backend, options.backend_password);
  if (!url.ok()) return url.status();
  Result<RedisOptions> redis = RedisOptionsFor(*url, options.allow_unsafe_backend);
  if (!redis.ok()) return redis.status();
  Result<Policies> policies = Policies::Make(options.policies);
  if (!policies.ok()) return policies.status();
  if (Status s = net::ValidateTlsOptions(options.http_tls); !s.ok()) {
    return s.WithPrefix("[http_client]");
  }
  auto p = std::make_unique<Parts>(std::move(options));
  p->policies.Set(std::move(*policies));
  Result<OpenedBackend> backend = OpenBackend(*url, p->options.allow_unsafe_backend);
  if (!backend.ok()) return backend.status();
  p->coordinator = std::move(backend->coordinator);
  if (!backend->unverified_tls.empty()) {
    p->log.Log(LogLevel::kWarn, "backend_tls_unverified", "", "",
               {{"backend", RedactUrl(p->options.backend)}, {"detail", backend->unverified_tls}});
  }
  Result<std::unique_ptr<RedisQueue>> queue = RedisQueue::Open(*redis);
  if (!queue.ok()) return queue.status();
  p->queue = std::move(*queue);
  SchedulerOptions so = p->options.scheduler;
  so.observer = &p->log_observer;
  so.worker_threads = p->options.concurrency;
  so.heartbeat = false;
  p->scheduler = std::make_unique<Scheduler>(so, *p->coordinator, p->guarded, SystemClock::Get());
  GNOMON_RETURN_IF_ERROR(p->scheduler->Start());
  std::string tags;
  for (const std::string& t : p->options.tags) tags += (tags.empty() ? "" : ",") + t;
  p->log.Info("worker_started", {{"backend", RedactUrl(p->options.backend)},
                                 {"tags", tags},
                                 {"concurrency", std::to_string(p->options.concurrency)}});
  std::unique_ptr<QueueWorker> worker(new QueueWorker(std::move(p)));
  QueueWorker* w = worker.get();
  worker->parts_->taker = std::jthread([w] { w->Take(); });
  return worker;
}

void QueueWorker::Take() {
  Parts& p = *parts_;
  SystemClock& clock = SystemClock::Get();
  const Duration ttl = p.options.scheduler.lease_ttl;
  const std::string& node_id = p.options.scheduler.node_id;
  Duration last_touch = clock.SteadyNow();
  while (true) {
    int free = 0;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      clock.WaitFor(lock, p.cv, std::chrono::milliseconds(200), [&] {
        return p.stopping || static_cast<int>(p.inflight.size()) < p.options.concurrency;
      });
      if (p.stopping) return;
      free = p.options.concurrency - static_cast<int>(p.inflight.size());
      if (clock.SteadyNow() - last_touch >= ttl / 3) {
        std::vector<QueueEntry> mine;
        for (const auto& [id, e] : p.inflight) mine.push_back(e);
        lock.unlock();
        if (Status t = p.queue->Touch(mine, node_id); !t.ok()) {
          p.log.Error("queue_touch_failed", {{"error", t.message()}});
        }
        last_touch = clock.SteadyNow();
      }
    }
    if (free <= 0) continue;
    Result<std::vector<QueueEntry>> taken =
        p.queue->Take(p.options.tags, node_id, free, std::chrono::seconds(1), 2 * ttl);
    if (!taken.ok()) {
      p.log.Error("queue_take_failed", {{"error", taken.status().message()}});
      std::unique_lock<std::mutex> lock(p.mu);
      clock.WaitFor(lock, p.cv, std::chrono::seconds(1), [&] { return p.stopping; });
      continue;
    }
    for (QueueEntry& e : *taken) {
      Result<QueuedFire> fire = DecodeQueuedFire(e.payload);
      if (!fire.ok()) {
        p.log.Error("queue_entry_invalid", {{"entry", e.id}, {"error", fire.status().message()}});
        (void)p.queue->Done(e);
        continue;
      }
      const std::string run_id = fire->claim.fire.RunId();
      const Duration renew_sent = clock.SteadyNow();
      Status renewed = p.coordinator->Renew(fire->claim, ttl);
      if (renewed.code() == StatusCode::kUnavailable) {
        // The backend is unreachable: leave the entry pending; it is retried or reclaimed.
        p.log.Error("queue_renew_failed", {{"entry", e.id}, {"error", renewed.message()}});
        continue;
      }
      if (!renewed.ok()) {
        // Stale: resolved elsewhere (lost run handled, or a second delivery): never run twice.
        p.log.Log(LogLevel::kInfo, "queue_entry_stale", fire->job.id, run_id,
                  {{"entry", e.id},
                   {"reclaimed", e.reclaimed ? "true" : "false"},
                   {"detail", renewed.message()}});
        (void)p.queue->Done(e);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(p.mu);
        p.inflight[e.id] = e;
      }
      Status started = p.scheduler->RunClaim(fire->job, fire->claim, renew_sent, [&p, e] {
        if (Status d = p.queue->Done(e); !d.ok()) {
          p.log.Error("queue_ack_failed", {{"entry", e.id}, {"error", d.message()}});
        }
        std::lock_guard<std::mutex> lock(p.mu);
        p.inflight.erase(e.id);
        p.cv.notify_all();
      });
      if (!started.ok()) {
        std::lock_guard<std::mutex> lock(p.mu);
        p.inflight.erase(e.id);  // stopping: left pending for another worker
      }
    }
  }
}

void QueueWorker::Stop() {
  if (parts_ == nullptr || parts_->stopped) return;
  Parts& p = *parts_;
  p.stopped = true;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.stopping = true;
  }
  p.cv.notify_all();
  if (p.taker.joinable()) p.taker.join();
  p.scheduler->Stop();  // runs finish (or are cancelled after shutdown_grace) and are reported
  p.log.Info("stopped");
}

}  // namespace gnomon::server

// QueueWorker: `gnomon worker` (queue mode, docs/operations.md "Queue mode"). It takes queued
// fires from the Redis streams of its tags and runs them with the engine's lease watchdog,
// timeouts, retries and fenced reports (Scheduler::RunClaim). An entry is acknowledged (and
// deleted) once its fire's outcome is reported, or at once when its claim is stale (the renew is
// refused: the fire was resolved elsewhere). While a run lasts its entry is touched every
// lease_ttl/3, so only a dead worker's entries are reclaimed by the others (after 2 x lease_ttl).
//
// Thread safety: Start and Stop from one owner thread; one taker thread of its own.
#ifndef GNOMON_SRC_SERVER_QUEUE_WORKER_H_
#define GNOMON_SRC_SERVER_QUEUE_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "src/server/executor_policy.h"
#include "src/server/logger.h"

namespace gnomon::server {

struct QueueWorkerOptions {
  // A redis:// or redis+sentinel:// backend URL (required).
  std::string backend;
  bool allow_unsafe_backend = false;
  // The backend's password when it is not in the URL (secret). Default empty.
  std::string backend_password;
  // The engine's settings; node_id is required, worker_threads is `concurrency`.
  SchedulerOptions scheduler;
  // Runs at once, 1-10000. Default 4.
  int concurrency = 4;
  // Queue tags to take ([A-Za-z0-9_.-]{1,64} each). Default {"default"}.
  std::vector<std::string> tags = {"default"};
  // Executor policies of jobs defined through the API, checked before each run as on the node
  // that scheduled it (src/server/executor_policy.h), and the TLS of HTTP jobs
  // (NodeOptions::http_tls). Default: the built-in policy, the system CAs.
  std::vector<ExecutorPolicy> policies;
  TlsOptions http_tls;
  LogFormat log_format = LogFormat::kText;
  LogLevel log_level = LogLevel::kInfo;
};

class QueueWorker {
 public:
  // InvalidArgument for bad options; Unavailable when the backend cannot be opened.
  static Result<std::unique_ptr<QueueWorker>> Start(QueueWorkerOptions options);
  ~QueueWorker();  // Stop()
  QueueWorker(const QueueWorker&) = delete;
  QueueWorker& operator=(const QueueWorker&) = delete;

  // Stops taking entries; runs finish (or are cancelled after shutdown_grace) and are reported.
  // Idempotent.
  void Stop();

 private:
  struct Parts;
  explicit QueueWorker(std::unique_ptr<Parts> parts);
  void Take();
  std::unique_ptr<Parts> parts_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_QUEUE_WORKER_H_

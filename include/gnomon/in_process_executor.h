// InProcessExecutor: runs in-process jobs by calling the Handler registered under the job id, or
// the fallback handler (SetFallback) for a job without one of its own.
//
// Outcomes: the handler returns OK -> kSucceeded; an error Status -> kFailed with its message
// (kCancelled if ctx.stop had been requested by then); a handler that throws -> kFailed with
// "handler threw: <what()>" (kCancelled likewise after a stop request); neither a handler of its
// own nor a fallback -> kFailed ("no in-process handler registered for job \"x\""). A stop
// requested before the call returns kCancelled without calling the handler.
//
// Thread-safe: Register/Unregister/Execute may be called from any thread at once. A handler is
// called without any lock held; unregistering a handler does not wait for calls in progress
// (they keep their own reference to it). Holds no threads.
#ifndef GNOMON_IN_PROCESS_EXECUTOR_H_
#define GNOMON_IN_PROCESS_EXECUTOR_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gnomon/executor.h"

namespace gnomon {

class InProcessExecutor final : public Executor {
 public:
  InProcessExecutor() = default;

  // Registers `handler` for `job_id`. InvalidArgument if the handler is empty; AlreadyExists if
  // the id already has one (Unregister first to replace it).
  Status Register(const std::string& job_id, Handler handler);
  // Removes the handler of `job_id`; returns whether there was one.
  bool Unregister(const std::string& job_id);
  // Whether `job_id` has a handler of its own.
  bool Contains(const std::string& job_id) const;
  // The handler of in-process jobs that have none of their own (it tells them apart by
  // ctx.job_id): one dispatching handler for many jobs costs no memory per job, where a million
  // registered handlers take ~160 bytes each. An empty handler removes the fallback.
  void SetFallback(Handler handler);

  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Handler>> handlers_;  // guarded by mu_
  std::shared_ptr<const Handler> fallback_;                         // guarded by mu_
};

}  // namespace gnomon

#endif  // GNOMON_IN_PROCESS_EXECUTOR_H_

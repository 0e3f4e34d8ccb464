// InProcessExecutor: the handler registry and the call, with handler exceptions caught here.
#include "gnomon/in_process_executor.h"

#include <exception>
#include <utility>

namespace gnomon {
namespace {

ExecResult Ended(RunOutcome outcome, std::string error) {
  ExecResult r;
  r.outcome = outcome;
  r.error = std::move(error);
  return r;
}

}  // namespace

Status InProcessExecutor::Register(const std::string& job_id, Handler handler) {
  if (!handler) return InvalidArgumentError("job \"" + job_id + "\": the handler is empty");
  std::lock_guard lock(mu_);
  const auto [it, inserted] =
      handlers_.try_emplace(job_id, std::make_shared<const Handler>(std::move(handler)));
  if (!inserted) return AlreadyExistsError("job \"" + job_id + "\" already has a handler");
  return Status::Ok();
}

bool InProcessExecutor::Unregister(const std::string& job_id) {
  std::lock_guard lock(mu_);
  return handlers_.erase(job_id) > 0;
}

bool InProcessExecutor::Contains(const std::string& job_id) const {
  std::lock_guard lock(mu_);
  return handlers_.contains(job_id);
}

void InProcessExecutor::SetFallback(Handler handler) {
  std::shared_ptr<const Handler> h;
  if (handler) h = std::make_shared<const Handler>(std::move(handler));
  std::lock_guard lock(mu_);
  fallback_ = std::move(h);
}

ExecResult InProcessExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  std::shared_ptr<const Handler> handler;
  {
    std::lock_guard lock(mu_);
    const auto it = handlers_.find(job.id);
    handler = it != handlers_.end() ? it->second : fallback_;
  }
  if (!handler) {
    return Ended(RunOutcome::kFailed,
                 "no in-process handler registered for job \"" + job.id + "\"");
  }
  if (ctx.stop_requested()) {
    return Ended(RunOutcome::kCancelled, "cancelled before the handler started");
  }
  // A failure after a stop request is the handler giving up because it was asked to.
  auto failed = [&ctx](std::string error) {
    return ctx.stop_requested() ? Ended(RunOutcome::kCancelled, "cancelled: " + error)
                                : Ended(RunOutcome::kFailed, std::move(error));
  };
  try {
    const Status status = (*handler)(ctx);
    if (status.ok()) return ExecResult{};
    return failed(status.ToString());
  } catch (const std::exception& e) {
    return failed(std::string("handler threw: ") + e.what());
  } catch (...) {
    return failed("handler threw a non-standard exception");
  }
}

}  // namespace gnomon

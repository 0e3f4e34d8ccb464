// CompositeExecutor: one Executor for the scheduler that dispatches each job by its kind:
// in_process -> the in-process executor, http -> the HTTP executor, command/argv -> the process
// executor. A job with no executor kind, or with more than one, fails with an error naming the
// job; so does a kind for which no executor was given.
//
// Thread-safe if the executors it dispatches to are (the gnomon ones are). Does not own them.
#ifndef GNOMON_COMPOSITE_EXECUTOR_H_
#define GNOMON_COMPOSITE_EXECUTOR_H_

#include "gnomon/executor.h"

namespace gnomon {

class CompositeExecutor final : public Executor {
 public:
  // Each may be null (jobs of that kind then fail). Not owned; each must outlive this.
  struct Targets {
    Executor* process = nullptr;     // command and argv jobs
    Executor* http = nullptr;        // http jobs
    Executor* in_process = nullptr;  // in_process jobs
  };
  explicit CompositeExecutor(Targets targets) : targets_(targets) {}

  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

 private:
  const Targets targets_;
};

}  // namespace gnomon

#endif  // GNOMON_COMPOSITE_EXECUTOR_H_

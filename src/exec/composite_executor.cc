// CompositeExecutor: dispatch by job kind.
#include "gnomon/composite_executor.h"

#include <string>

namespace gnomon {

ExecResult CompositeExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  const bool is_process = !job.command.empty() || !job.argv.empty();
  const int kinds = int{job.in_process} + int{job.http.has_value()} + int{is_process};
  auto fail = [&job](std::string why) {
    ExecResult r;
    r.outcome = RunOutcome::kFailed;
    r.error = "job \"" + job.id + "\": " + why;
    return r;
  };
  if (kinds == 0) return fail("no executor (command, argv, http or an in-process handler)");
  if (kinds > 1) return fail("more than one executor (command/argv, http, in-process)");
  Executor* target = job.in_process ? targets_.in_process
                     : job.http     ? targets_.http
                                    : targets_.process;
  const char* kind = job.in_process ? "in-process" : job.http ? "http" : "process";
  if (target == nullptr) return fail(std::string("no ") + kind + " executor is configured");
  return target->Execute(job, ctx);
}

}  // namespace gnomon

// Internal to gnomon_exec: the plan of a process run (program, argv, environment, user, limits),
// built in the parent before the fork, because between fork and exec the child may only call
// async-signal-safe functions. Plain data and a pure function of the job, the run and the
// daemon's environment; thread-compatible.
#ifndef GNOMON_SRC_EXEC_EXEC_PLAN_H_
#define GNOMON_SRC_EXEC_EXEC_PLAN_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "gnomon/executor.h"
#include "gnomon/job.h"

namespace gnomon::exec_internal {

// Everything the child needs, built in the parent before the fork.
struct ExecPlan {
  std::string display;             // the program as the job named it, for errors
  std::vector<std::string> paths;  // execve candidates, in order (PATH search)
  std::vector<std::string> args;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<char*> argv_ptrs;
  std::vector<char*> envp_ptrs;
  int max_fd = 1024;     // for the close fallback without close_range
  pid_t parent_pid = 0;  // the gnomon process (checked by the supervisor after PR_SET_PDEATHSIG)
  // run_as: switch to uid/gid/groups before exec (only when they differ from the daemon's).
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home;  // the run user's home directory (the job starts there when switching)
  // setrlimit before exec (soft = hard = value, but RLIMIT_CPU's hard is one second more).
  struct Limit {
    int resource;
    rlim_t soft;
    rlim_t hard;
  };
  std::vector<Limit> limits;
  std::string cgroup_procs;  // the run cgroup's cgroup.procs, joined by the supervisor; or ""
};

// Builds the plan; an error string for a job that cannot be started.
// `inherit_all`: ProcessExecutorOptions::inherit_environment; `cgroup_limits_*`: the run's cgroup
// enforces memory_max / pids_max (else rlimits stand in).
std::optional<std::string> BuildPlan(const JobSpec& job, const RunContext& ctx,
                                     const std::string& shell, bool inherit_all,
                                     bool cgroup_limits_memory, bool cgroup_limits_pids,
                                     ExecPlan& plan);

}  // namespace gnomon::exec_internal

#endif  // GNOMON_SRC_EXEC_EXEC_PLAN_H_

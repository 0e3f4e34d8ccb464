// Internal to gnomon_exec: keeping every process of a run inside the run (ProcessExecutor).
//
// Two mechanisms, the better one that is there:
// - cgroup v2, when this process may create cgroups in the unified hierarchy (detected once):
//   each run gets its own cgroup, joined by the run's supervisor before it forks the job, so every
//   descendant is in it whatever it does (setsid, double fork); `cgroup.kill` ends them all at
//   once. Where the memory and pids controllers are delegated, memory_max and pids_max become
//   the cgroup's memory.max and pids.max.
// - Otherwise the supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant whose
//   parent exits is re-parented to it rather than to init, so every descendant stays in the
//   supervisor's process tree, and the tree is walked through /proc/<pid>/task/*/children and
//   signalled process by process, again until none is left.
// The subreaper is set in both cases.
#ifndef GNOMON_SRC_EXEC_CONTAINMENT_H_
#define GNOMON_SRC_EXEC_CONTAINMENT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gnomon::exec_internal {

// Where run cgroups are created, when cgroup v2 can be used. Immutable; thread-safe.
struct CgroupBase {
  std::string dir;      // an existing cgroup directory this process may create children in
  bool memory = false;  // the memory controller is enabled for the children
  bool pids = false;    // the pids controller is enabled for the children
};

// Looks for a cgroup v2 hierarchy in /proc/self/mountinfo and this process's cgroup in
// /proc/self/cgroup, then tries to create (and enable the memory and pids controllers in)
// "<own cgroup>/gnomon-runs-<pid>-<n>" (n counts the calls in this process). nullopt, with
// `why_not` set, when cgroup v2 cannot be used.
std::optional<CgroupBase> DetectCgroupBase(std::string* why_not);

// One run's cgroup, under a CgroupBase. Move-only; removes the cgroup on destruction (after
// Kill). Thread-compatible.
class RunCgroup {
 public:
  // Creates "<base>/<name>" with the limits the base allows (0 = none). nullopt and `error` when
  // the directory cannot be made or a limit cannot be written.
  static std::optional<RunCgroup> Create(const CgroupBase& base, const std::string& name,
                                         int64_t memory_max, int pids_max, std::string* error);
  RunCgroup(RunCgroup&& other) noexcept;
  RunCgroup& operator=(RunCgroup&&) = delete;
  RunCgroup(const RunCgroup&) = delete;
  ~RunCgroup();

  // The cgroup.procs file the supervisor writes its pid into (built before the fork).
  const std::string& procs_path() const { return procs_path_; }
  // Kills every process in the cgroup (cgroup.kill) and waits, at most ~1 s, until it is empty.
  void Kill();
  // Whether the kernel killed a process of the run for memory.max (memory.events oom_kill).
  bool OomKilled() const;
  // Whether memory.max / pids.max were set in the cgroup (else rlimits stand in).
  bool limits_memory() const { return memory_limited_; }
  bool limits_pids() const { return pids_limited_; }

 private:
  explicit RunCgroup(std::string dir) : dir_(std::move(dir)), procs_path_(dir_ + "/cgroup.procs") {}
  std::string dir_;
  std::string procs_path_;
  bool memory_limited_ = false;
  bool pids_limited_ = false;
};

// Every living descendant of `root` (not `root` itself, not zombies), from
// /proc/<pid>/task/*/children.
std::vector<pid_t> Descendants(pid_t root);
// Sends `sig` to every descendant of `root`. With SIGKILL, walks again until no descendant is
// left (a process forking meanwhile is caught by the next walk; at most 100 walks).
void SignalDescendants(pid_t root, int sig);

}  // namespace gnomon::exec_internal

#endif  // GNOMON_SRC_EXEC_CONTAINMENT_H_

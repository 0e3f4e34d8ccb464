// ProcessExecutor: runs command and argv jobs as child processes (fork/exec), one process group
// per attempt, with the run's environment (docs/guarantees.md "What a run sees").
//
// What a child gets:
// - `command`: exec'd as `/bin/sh -c <command>` (the only case that uses a shell).
// - `argv`: exec'd directly, no shell; argv[0] without a '/' is looked up in the PATH of the
//   child's environment (or "/usr/local/bin:/usr/bin:/bin" when it has none).
// - Environment: the parent's environment (read from `environ` at each start: do not setenv()
//   concurrently), then job.env, then RunEnvironment(ctx) (run variables win over both). A job.env
//   name that is empty or holds '=' fails the attempt; an environment too big for execve fails it
//   with "Argument list too long".
// - stdin from /dev/null; stdout and stderr into one pipe, of which the last kMaxOutputBytes are
//   kept (memory stays bounded whatever the child prints). Every other descriptor is closed at
//   exec. The signal mask is cleared and ignored signals are reset to their default.
// - Its own process group, so that cancellation reaches every descendant. The group is led by a
//   small supervisor process (a child of the gnomon process, shown as "gnomon-sup") which forks
//   the job into it and stays until the group is killed. The job's exit status is reported as the
//   job's own (the supervisor is invisible in ExecResult).
//
// How an attempt ends:
// - The main process exits 0 -> kSucceeded; exits N != 0 -> kFailed, exit_code N, error "exited
//   with status N"; killed by a signal -> kFailed, error names the signal ("killed by signal 9
//   (SIGKILL)"). The exec itself failing (missing binary, no permission) -> kFailed with the path
//   and the reason ("exec /x/y: No such file or directory"); exit_code unset.
// - Once the main process has exited, processes it left behind in its process group are killed
//   (SIGKILL): an attempt leaves nothing running. Output still arriving from processes that left
//   the group (setsid) is read for at most `output_drain_timeout` after that.
// - Cancellation (ctx.stop requested): SIGTERM to the whole process group, then SIGKILL to the
//   group after job.kill_grace. Execute returns once the main process has exited and the output
//   pipe is closed (every process of the group is gone), or when kill_grace ends, whichever is
//   first; the group is SIGKILLed on the way out in any case. A run that
//   ends with a non-zero status or a signal after a stop request is kCancelled; one that still
//   exits 0 is kSucceeded (it finished its work). A stop requested before the start returns
//   kCancelled without starting anything.
// - Checkpoints: an output line `::gnomon-checkpoint <value>` (on stdout or stderr; the two share
//   one pipe) calls ctx.save_checkpoint(value) from the executing thread. Lines are kept in the
//   output too. Lines longer than kMaxCheckpointLineBytes are not checkpoints.
//
// - The gnomon process dies (kill -9, crash): the supervisor SIGKILLs the whole process group, so
//   no part of the run keeps running unowned while the fire is resolved as lost (and perhaps
//   re-run) elsewhere (docs/guarantees.md 4 and 5). This covers the group for as long as it
//   exists, including the kill_grace of a cancellation. Processes that left the group (setsid)
//   are not covered, except the job's main process itself (it dies with the supervisor).
//
// The supervisor is always reaped, and reaps the job's main process (no zombies). Event-driven:
// one poll() over the output pipe, a status pipe from the supervisor and an eventfd signalled by
// a std::stop_callback; the only poll timeout is the kill_grace / drain deadline, measured on the
// Clock's monotonic time. Uses close_range (Linux 5.9+); older kernels fall back to a close loop
// up to the descriptor limit.
#ifndef GNOMON_PROCESS_EXECUTOR_H_
#define GNOMON_PROCESS_EXECUTOR_H_

#include <cstddef>
#include <memory>
#include <string>

#include "gnomon/executor.h"
#include "gnomon/time.h"

namespace gnomon {

// Longest output line that can carry a checkpoint (marker included).
inline constexpr size_t kMaxCheckpointLineBytes = 64 * 1024;

struct ProcessExecutorOptions {
  // The shell for `command` jobs, run as `<shell> -c <command>`. Default "/bin/sh".
  std::string shell = "/bin/sh";
  // How long output from processes that escaped the process group is still read after the main
  // process exited. Default 2 s.
  Duration output_drain_timeout = std::chrono::seconds(2);
  // Bytes of output kept (the last ones). Default kMaxOutputBytes (64 KiB).
  size_t max_output_bytes = kMaxOutputBytes;
  // Whether a run sees the whole environment of the daemon (embedders that want it), instead of
  // PATH, LANG and TZ, its user's HOME/USER/LOGNAME and the job's inherit_env. Default false.
  bool inherit_environment = false;
  // Whether to contain runs in cgroup v2 cgroups when this process may create them (else, or
  // when false, the supervisor's subreaper holds the run). Default true.
  bool use_cgroups = true;
};

// Thread-safe: Execute may run on many threads at once; each call owns its child. Holds no
// threads of its own.
class ProcessExecutor final : public Executor {
 public:
  // `clock` measures kill_grace and the drain timeout (SteadyNow); not owned, must outlive this.
  explicit ProcessExecutor(ProcessExecutorOptions options = {}, Clock& clock = SystemClock::Get());

  ~ProcessExecutor() override;
  ProcessExecutor(const ProcessExecutor&) = delete;
  ProcessExecutor& operator=(const ProcessExecutor&) = delete;

  // REQUIRES: job.command or job.argv is set (not both); otherwise kFailed with an error.
  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

  // How runs are contained, for the start log: "cgroup v2 (<dir>; limits: ...)" or "child
  // subreaper and process tree walk (no cgroup: <why>)".
  const std::string& containment() const { return containment_; }

 private:
  struct Cgroups;
  const ProcessExecutorOptions options_;
  Clock& clock_;
  std::unique_ptr<Cgroups> cgroups_;  // null: no cgroup v2 hierarchy to use
  std::string containment_;
};

}  // namespace gnomon

#endif  // GNOMON_PROCESS_EXECUTOR_H_

// ProcessExecutor: fork a supervisor that leads the run's process group and forks/execs the job
// in it; one poll() loop per attempt in the parent.
//
// Between fork and exec the child may only call async-signal-safe functions (the parent is
// multi-threaded), and the supervisor never execs, so everything the supervisor and the job need
// (paths, argv, envp) is built before the fork.
#include "gnomon/process_executor.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "src/exec/containment.h"
#include "src/exec/exec_plan.h"
#include "src/exec/output_tail.h"
#include "src/exec/posix_util.h"

extern char** environ;  // NOLINT: POSIX

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace gnomon {
namespace {

using exec_internal::BuildPlan;
using exec_internal::CgroupBase;
using exec_internal::ErrnoText;
using exec_internal::ExecPlan;
using exec_internal::LineSplitter;
using exec_internal::OutputTail;
using exec_internal::RunCgroup;
using exec_internal::SignalDescendants;
using exec_internal::SignalName;
using exec_internal::UniqueFd;

// Output read per wake-up before looking at the other events again (a child that prints without
// pause must not delay its own cancellation).
constexpr int kMaxReadsPerWakeup = 16;

// The signal the kernel sends the supervisor when the gnomon process dies (PR_SET_PDEATHSIG). The
// supervisor blocks every signal and only waits for this one and SIGCHLD; a stray one (a job's
// `kill -USR2 0`) is told apart by getppid(), which changes only when the gnomon process is gone.
constexpr int kHolderDeathSignal = SIGUSR2;

// What the supervisor or the job reports through the CLOEXEC report pipe when the job cannot
// start.
struct ChildFailure {
  enum Stage : int {
    kSetpgid,
    kDeathSignal,
    kStdin,
    kStdout,
    kFork,
    kExec,
    kCgroup,
    kLimits,
    kUser,
    kHome
  } stage;
  int err;
};

const char* StageName(ChildFailure::Stage stage) {
  switch (stage) {
    case ChildFailure::kSetpgid:
      return "setpgid";
    case ChildFailure::kDeathSignal:
      return "prctl(PR_SET_PDEATHSIG)";
    case ChildFailure::kStdin:
      return "redirect stdin from /dev/null";
    case ChildFailure::kStdout:
      return "redirect stdout/stderr";
    case ChildFailure::kFork:
      return "fork";
    case ChildFailure::kExec:
      return "exec";
    case ChildFailure::kCgroup:
      return "join the run's cgroup";
    case ChildFailure::kLimits:
      return "set the run's limits (setrlimit)";
    case ChildFailure::kUser:
      return "switch to the run_as user (setgroups/setgid/setuid)";
    case ChildFailure::kHome:
      return "change to the run_as user's home directory";
  }
  return "start";
}

ExecResult Failed(std::string error) {
  ExecResult r;
  r.outcome = RunOutcome::kFailed;
  r.error = std::move(error);
  return r;
}

// A descriptor numbered 3 or above (so the child's dup2 onto 0-2 never clobbers it), CLOEXEC.
UniqueFd AboveStdio(UniqueFd fd) {
  if (!fd.valid() || fd.get() > 2) return fd;
  return UniqueFd(fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
}

// In the supervisor or the job: report why the job could not start, then exit.
// Async-signal-safe.
[[noreturn]] void ChildFail(int report_fd, ChildFailure::Stage stage, int err) {
  const ChildFailure failure{stage, err};
  if (write(report_fd, &failure, sizeof(failure)) < 0) {
    // Nothing left to report to; the parent sees the job end without a status.
  }
  _exit(127);
}

// In the supervisor: closes every descriptor above stderr except `keep_a` and `keep_b` (both
// >= 3). The supervisor never execs, so O_CLOEXEC does not close what it inherited (other runs'
// pipes, sockets) and it lives as long as the job. Async-signal-safe.
void CloseAllBut(int keep_a, int keep_b, int max_fd) {
  const unsigned lo = static_cast<unsigned>(std::min(keep_a, keep_b));
  const unsigned hi = static_cast<unsigned>(std::max(keep_a, keep_b));
  auto close_span = [](unsigned first, unsigned last) {
    return first > last || syscall(SYS_close_range, first, last, 0U) == 0;
  };
  if (close_span(3, lo - 1) && close_span(lo + 1, hi - 1) && close_span(hi + 1, ~0U)) return;
  for (int fd = 3; fd < max_fd; ++fd) {  // without close_range (Linux < 5.9)
    if (fd != keep_a && fd != keep_b) close(fd);
  }
}

// In the job process, forked by the supervisor: exec. Only async-signal-safe calls.
[[noreturn]] void RunJob(const ExecPlan& plan, pid_t supervisor, int report_fd) {
  // Should the supervisor be SIGKILLed, the job dies too, even if it left the process group.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor) _exit(127);
  // The supervisor reset every disposition to SIG_DFL; the job starts with an empty mask.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  for (const ExecPlan::Limit& limit : plan.limits) {
    const rlimit value{limit.soft, limit.hard};
    if (setrlimit(limit.resource, &value) != 0) ChildFail(report_fd, ChildFailure::kLimits, errno);
  }
  if (plan.switch_user) {
    // Groups first (they need the privilege the uid change gives up), then the gid, then the uid.
    if (setgroups(plan.groups.size(), plan.groups.data()) != 0 || setgid(plan.gid) != 0 ||
        setuid(plan.uid) != 0) {
      ChildFail(report_fd, ChildFailure::kUser, errno);
    }
    // A change of credentials clears the parent-death signal: set it again.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != supervisor) _exit(127);
    if (chdir(plan.home.c_str()) != 0 && chdir("/") != 0) {
      ChildFail(report_fd, ChildFailure::kHome, errno);
    }
  }

  int err = ENOENT;
  bool saw_eacces = false;
  for (const std::string& path : plan.paths) {
    execve(path.c_str(), plan.argv_ptrs.data(), plan.envp_ptrs.data());
    err = errno;
    if (err == EACCES) {
      saw_eacces = true;
    } else if (err != ENOENT && err != ENOTDIR) {
      break;  // the file exists but cannot run: report this, as execvp does
    }
  }
  ChildFail(report_fd, ChildFailure::kExec, saw_eacces && err != ENOEXEC ? EACCES : err);
}

// Appends the decimal digits of `value` (> 0) to `out` at *len. Async-signal-safe.
void AppendNumber(char* out, int* len, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 23);
  while (n > 0) out[(*len)++] = digits[--n];
}

void AppendText(char* out, int* len, const char* text) {
  for (; *text != '\0'; ++text) out[(*len)++] = *text;
}

// In the supervisor when the gnomon process died: SIGKILLs every descendant, walking
// /proc/<pid>/task/<pid>/children from this process down with fixed buffers (async-signal-safe:
// open, read, kill), until a walk finds nobody (at most 64 walks).
void KillOwnDescendants() {
  constexpr int kMax = 4096;
  pid_t stack[kMax];
  for (int walk = 0; walk < 64; ++walk) {
    int top = 0;
    stack[top++] = getpid();
    bool found = false;
    while (top > 0) {
      const pid_t pid = stack[--top];
      char path[96];
      int len = 0;
      AppendText(path, &len, "/proc/");
      AppendNumber(path, &len, pid);
      AppendText(path, &len, "/task/");
      AppendNumber(path, &len, pid);
      AppendText(path, &len, "/children");
      path[len] = '\0';
      const int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char buf[4096];
      const ssize_t got = read(fd, buf, sizeof buf);
      close(fd);
      pid_t child = 0;
      for (ssize_t i = 0; i < got; ++i) {
        if (buf[i] >= '0' && buf[i] <= '9') {
          child = child * 10 + (buf[i] - '0');
        } else if (child > 0) {
          kill(child, SIGKILL);
          found = true;
          if (top < kMax) stack[top++] = child;
          child = 0;
        }
      }
    }
    if (!found) return;
  }
}

// In the child of the gnomon process, after fork: becomes the leader of the run's process group
// and the supervisor of the job, which it forks and execs in that group. It reports the job's
// wait status through `status_fd`, then stays until the parent SIGKILLs the group; if the gnomon
// process dies first, it SIGKILLs the group itself. It never execs and runs only
// async-signal-safe code (the parent is multi-threaded).
//
// Why a supervisor: PR_SET_PDEATHSIG reaches only the process that set it, not the job's
// descendants (`sh -c "step; sleep 60"` would leave `sleep` running, unowned, while another node
// re-runs the fire). A process that outlives the job's main process and is woken by the death
// of the gnomon process covers the whole group for as long as it exists.
[[noreturn]] void RunSupervisor(const ExecPlan& plan, int out_fd, int report_fd, int status_fd) {
  // Handlers of the parent must not run here, and ignored signals are not inherited by the job.
  // The mask stays full (the parent blocked everything around the fork): the group's SIGTERM on
  // cancellation stays pending here, and the two signals waited for are taken by sigwaitinfo.
  // Every disposition, flags included: SA_NOCLDWAIT on SIGCHLD would reap the job unseen.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  prctl(PR_SET_NAME, "gnomon-sup");  // best effort: how it shows in ps

  if (setpgid(0, 0) != 0) ChildFail(report_fd, ChildFailure::kSetpgid, errno);
  // Descendants whose parent exits (a double fork, setsid) are re-parented here, not to init:
  // the whole tree stays below this process, where the run's end finds and kills it.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (!plan.cgroup_procs.empty()) {
    // Join the run's cgroup before the job exists, so that everything it starts is in it.
    char pid_text[24];
    int len = 0;
    AppendNumber(pid_text, &len, getpid());
    const int procs = open(plan.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (procs < 0 || write(procs, pid_text, static_cast<size_t>(len)) != len) {
      ChildFail(report_fd, ChildFailure::kCgroup, errno);
    }
    close(procs);
  }
  // PR_SET_PDEATHSIG fires when the forking *thread* exits; getppid() tells the gnomon process's
  // death from that. If the parent already died, stop here: nothing has started.
  if (prctl(PR_SET_PDEATHSIG, kHolderDeathSignal) != 0) {
    ChildFail(report_fd, ChildFailure::kDeathSignal, errno);
  }
  if (getppid() != plan.parent_pid) _exit(127);

  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0) ChildFail(report_fd, ChildFailure::kStdin, errno);
  if (null_fd != 0 && dup2(null_fd, 0) < 0) ChildFail(report_fd, ChildFailure::kStdin, errno);
  // out_fd, report_fd and status_fd are >= 3 (AboveStdio), so these never clobber them.
  if (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) {
    ChildFail(report_fd, ChildFailure::kStdout, errno);
  }
  // Also closes out_fd and null_fd. The two kept ones are O_CLOEXEC: the job's copies close at
  // its exec.
  CloseAllBut(report_fd, status_fd, plan.max_fd);

  const pid_t supervisor = getpid();
  const pid_t job = _Fork();  // async-signal-safe, unlike fork() (no atfork handlers)
  if (job < 0) ChildFail(report_fd, ChildFailure::kFork, errno);
  if (job == 0) RunJob(plan, supervisor, report_fd);

  // The report pipe now closes when the job execs (or carries why it could not). The output pipe
  // must close once the job's processes are gone, so the supervisor keeps no copy of it.
  close(report_fd);
  close(0);
  close(1);
  close(2);

  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, kHolderDeathSignal);
  while (true) {
    siginfo_t info;
    const int sig = sigwaitinfo(&wait_set, &info);
    if (sig == kHolderDeathSignal) {
      if (getppid() != plan.parent_pid) {
        KillOwnDescendants();  // those that left the group: the subreaper holds them all
        kill(0, SIGKILL);      // the whole group, this process included
        _exit(128 + SIGKILL);
      }
    } else if (sig == SIGCHLD) {
      // Reap every child: the job, and the orphans re-parented here (the subreaper).
      while (true) {
        int status = 0;
        const pid_t reaped = waitpid(-1, &status, WNOHANG);
        if (reaped <= 0) break;
        if (reaped == job) {
          // A 4-byte write to a pipe is atomic; the parent reads it once readable.
          if (write(status_fd, &status, sizeof(status)) < 0) {
            // The parent is gone or stopped reading: it sees the pipe close instead.
          }
        }
      }
    }
  }
}

// Owns the supervisor. On every path out of Execute everything the run started is SIGKILLed (the
// run's cgroup, every descendant of the supervisor, its process group) and the supervisor reaped:
// no zombies, nothing left running.
class ChildGuard {
 public:
  ChildGuard(pid_t pid, RunCgroup* cgroup) : pid_(pid), cgroup_(cgroup) {}
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() { KillAndReap(); }

  // Kills every process of the run but the supervisor, which stays: it holds the orphans as
  // their subreaper (so the walk finds them) and reaps them. Every member of the run's process
  // group is one of its descendants.
  void KillDescendants() {
    if (pid_ > 0) SignalDescendants(pid_, SIGKILL);
  }
  // SIGKILLs the run and the supervisor, then reaps the supervisor (blocks only until the
  // SIGKILL takes effect).
  void KillAndReap() {
    if (pid_ <= 0) return;
    SignalDescendants(pid_, SIGKILL);  // before the supervisor dies: its orphans stay below it
    if (cgroup_ != nullptr) cgroup_->Kill();
    killpg(pid_, SIGKILL);
    kill(pid_, SIGKILL);  // also when it failed before its setpgid
    while (true) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, 0);
      if (r == pid_) {
        status_ = status;
        break;
      }
      if (r < 0 && errno == EINTR) continue;
      break;  // ECHILD: reaped elsewhere (SIGCHLD ignored); the status is lost
    }
    pid_ = -1;
  }
  // The supervisor's own wait status, once reaped.
  std::optional<int> status() const { return status_; }

 private:
  pid_t pid_;
  RunCgroup* cgroup_;
  std::optional<int> status_;
};

int PollTimeoutMs(std::optional<Duration> deadline, Duration now) {
  if (!deadline) return -1;
  const Duration left = *deadline - now;
  if (left <= Duration::zero()) return 0;
  return static_cast<int>(std::min<Duration::rep>(left.count(), INT_MAX));
}

}  // namespace

struct ProcessExecutor::Cgroups {
  CgroupBase base;
  std::atomic<uint64_t> next{0};
};

ProcessExecutor::ProcessExecutor(ProcessExecutorOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  std::string why_not = "disabled (ProcessExecutorOptions::use_cgroups = false)";
  if (options_.use_cgroups) {
    if (std::optional<CgroupBase> base = exec_internal::DetectCgroupBase(&why_not)) {
      cgroups_ = std::make_unique<Cgroups>();
      cgroups_->base = std::move(*base);
      containment_ = "cgroup v2 (" + cgroups_->base.dir + "; limits: memory " +
                     (cgroups_->base.memory ? "memory.max" : "RLIMIT_AS") + ", pids " +
                     (cgroups_->base.pids ? "pids.max" : "RLIMIT_NPROC") + ")";
      return;
    }
  }
  containment_ = "child subreaper and process tree walk (no cgroup: " + why_not + ")";
}

ProcessExecutor::~ProcessExecutor() {
  if (cgroups_) ::rmdir(cgroups_->base.dir.c_str());
}

ExecResult ProcessExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  // The run's cgroup, when there is a hierarchy (else the subreaper holds the run).
  std::string cgroup_error;
  std::optional<RunCgroup> cgroup =
      cgroups_ ? RunCgroup::Create(cgroups_->base, "run-" + std::to_string(cgroups_->next++),
                                   job.memory_max, job.pids_max, &cgroup_error)
               : std::nullopt;
  if (cgroups_ && !cgroup) return Failed(cgroup_error);
  ExecPlan plan;
  if (auto error =
          BuildPlan(job, ctx, options_.shell, options_.inherit_environment,
                    cgroup && cgroup->limits_memory(), cgroup && cgroup->limits_pids(), plan)) {
    return Failed(*error);
  }
  if (cgroup) plan.cgroup_procs = cgroup->procs_path();

  // Cancellation wakes the poll loop through an eventfd. Declared before the callback so that
  // it outlives it (the callback's destructor waits for a running callback).
  UniqueFd stop_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid()) return Failed("eventfd: " + ErrnoText(errno));
  std::stop_callback on_stop(ctx.stop, [fd = stop_fd.get()] {
    const uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) < 0) {
      // The counter cannot overflow with one write per stop; nothing to do.
    }
  });
  if (ctx.stop.stop_requested()) {
    ExecResult r;
    r.outcome = RunOutcome::kCancelled;
    r.error = "cancelled before the process started";
    return r;
  }

  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Failed("pipe: " + ErrnoText(errno));
  UniqueFd out_read = AboveStdio(UniqueFd(out_pipe[0]));
  UniqueFd out_write = AboveStdio(UniqueFd(out_pipe[1]));
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) return Failed("pipe: " + ErrnoText(errno));
  UniqueFd report_read(report_pipe[0]);
  UniqueFd report_write = AboveStdio(UniqueFd(report_pipe[1]));
  // The supervisor writes the job's wait status here; the pipe closes without it if the
  // supervisor dies first (the group was SIGKILLed).
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) return Failed("pipe: " + ErrnoText(errno));
  UniqueFd status_read(status_pipe[0]);
  UniqueFd status_write = AboveStdio(UniqueFd(status_pipe[1]));
  if (!out_read.valid() || !out_write.valid() || !report_write.valid() || !status_write.valid()) {
    return Failed("fcntl(F_DUPFD): " + ErrnoText(errno));
  }
  // Only our ends are non-blocking; the job's writes block as usual when the pipe is full.
  fcntl(out_read.get(), F_SETFL, fcntl(out_read.get(), F_GETFL) | O_NONBLOCK);
  fcntl(status_read.get(), F_SETFL, fcntl(status_read.get(), F_GETFL) | O_NONBLOCK);

  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = fork();
  if (pid == 0) RunSupervisor(plan, out_write.get(), report_write.get(), status_write.get());
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Failed("fork: " + ErrnoText(fork_errno));

  // `pid` is the supervisor, and the id of the run's process group.
  ChildGuard child(pid, cgroup ? &*cgroup : nullptr);
  // Also here, so that a killpg right after the fork already reaches the group.
  setpgid(pid, pid);
  out_write.Reset();
  report_write.Reset();
  status_write.Reset();

  // Wait for the exec: the report pipe closes on success, or carries the failure.
  ChildFailure failure{};
  size_t got = 0;
  while (got < sizeof(failure)) {
    const ssize_t n =
        read(report_read.get(), reinterpret_cast<char*>(&failure) + got, sizeof(failure) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  report_read.Reset();
  if (got == sizeof(failure)) {
    child.KillAndReap();
    if (failure.stage == ChildFailure::kExec) {
      return Failed("exec " + plan.display + ": " + ErrnoText(failure.err));
    }
    return Failed(std::string(StageName(failure.stage)) + ": " + ErrnoText(failure.err));
  }

  OutputTail tail(options_.max_output_bytes);
  LineSplitter lines(kMaxCheckpointLineBytes, [&ctx](std::string_view line) {
    std::string_view value;
    if (exec_internal::ParseCheckpointLine(line, &value)) {
      // A failed save (e.g. the lease is lost) surfaces through the scheduler's own cancellation.
      static_cast<void>(ctx.Checkpoint(std::string(value)));
    }
  });

  const Duration kill_grace = std::max(job.kill_grace, Duration::zero());
  bool out_open = true;
  bool exited = false;  // the main process exited (the supervisor, which holds the group id
                        // for killpg, lives until the group is SIGKILLed)
  std::optional<int> job_status;  // the main process's wait status, as the supervisor reported
  bool stop_seen = false;
  bool term_sent = false;                  // cancellation began
  bool group_killed = false;               // SIGKILL went to the group
  bool grace_expired = false;              // ... because kill_grace ran out
  std::optional<Duration> kill_deadline;   // after SIGTERM
  std::optional<Duration> drain_deadline;  // after the group was killed
  std::vector<char> buf(64 * 1024);
  auto kill_group = [&] {
    child.KillDescendants();
    group_killed = true;
    drain_deadline = clock_.SteadyNow() + options_.output_drain_timeout;
  };

  while (!exited || out_open) {
    pollfd fds[3];
    nfds_t n = 0;
    int out_idx = -1, status_idx = -1, stop_idx = -1;
    if (out_open) {
      out_idx = static_cast<int>(n);
      fds[n++] = {out_read.get(), POLLIN, 0};
    }
    if (!exited) {
      status_idx = static_cast<int>(n);
      fds[n++] = {status_read.get(), POLLIN, 0};
    }
    if (!stop_seen) {
      stop_idx = static_cast<int>(n);
      fds[n++] = {stop_fd.get(), POLLIN, 0};
    }
    const std::optional<Duration> deadline = group_killed ? drain_deadline : kill_deadline;
    const int rc = poll(fds, n, PollTimeoutMs(deadline, clock_.SteadyNow()));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return Failed("poll: " + ErrnoText(errno));  // the guard kills and reaps
    }
    // poll's own timeout ran on the same monotonic time, so a timeout means the deadline passed.
    const bool deadline_passed = deadline && (rc == 0 || clock_.SteadyNow() >= *deadline);
    auto ready = [&](int idx) { return idx >= 0 && fds[idx].revents != 0; };

    if (ready(out_idx)) {
      for (int i = 0; i < kMaxReadsPerWakeup; ++i) {
        const ssize_t got_bytes = read(out_read.get(), buf.data(), buf.size());
        if (got_bytes > 0) {
          const std::string_view chunk(buf.data(), static_cast<size_t>(got_bytes));
          tail.Append(chunk);
          lines.Feed(chunk);
          if (ctx.on_output) ctx.on_output(chunk);
          continue;
        }
        if (got_bytes < 0 && errno == EINTR) continue;
        if (got_bytes < 0 && errno == EAGAIN) break;
        out_open = false;  // EOF: every writer is gone (or a read error)
        break;
      }
    }
    if (ready(stop_idx)) {
      stop_seen = true;
      if (!group_killed) {
        killpg(pid, SIGTERM);
        SignalDescendants(pid, SIGTERM);  // also those that left the group
        term_sent = true;
        kill_deadline = clock_.SteadyNow() + kill_grace;
      } else {
        out_open = false;  // only processes that left the group still write: stop reading
      }
    }
    if (ready(status_idx)) {
      int status = 0;
      const ssize_t got_bytes = read(status_read.get(), &status, sizeof(status));
      if (got_bytes == static_cast<ssize_t>(sizeof(status))) job_status = status;
      if (got_bytes >= 0 || (errno != EINTR && errno != EAGAIN)) {
        // With a status; or closed without one: the supervisor died (its own status says how).
        exited = true;
        // The run is over: nothing it started may outlive it. During a cancellation the rest of
        // the group keeps its kill_grace (the supervisor still watches over it).
        if (!term_sent && !group_killed) kill_group();
      }
    }
    if (deadline_passed) {
      if (!group_killed) {
        kill_group();
        grace_expired = true;
      } else {
        out_open = false;  // processes outside the group still hold the pipe: stop reading
      }
    }
  }
  child.KillAndReap();  // the supervisor, and whatever is left of the group (normally nothing)
  lines.Finish();

  ExecResult result;
  result.output = tail.Contents();
  std::string cancel_note;
  if (term_sent) {
    cancel_note = "cancelled: sent SIGTERM to the process group";
    if (grace_expired) {
      cancel_note += ", then SIGKILL after kill_grace " + FormatDuration(kill_grace);
    }
    cancel_note += "; ";
  }
  const std::optional<int> status = job_status ? job_status : child.status();
  if (!status) {
    result.outcome = term_sent ? RunOutcome::kCancelled : RunOutcome::kFailed;
    result.error = cancel_note + "exit status unavailable (was SIGCHLD ignored?)";
  } else if (WIFEXITED(*status)) {
    const int code = WEXITSTATUS(*status);
    result.exit_code = code;
    if (code != 0) {
      result.outcome = term_sent ? RunOutcome::kCancelled : RunOutcome::kFailed;
      result.error = cancel_note + "exited with status " + std::to_string(code);
    }
  } else {
    const int sig = WIFSIGNALED(*status) ? WTERMSIG(*status) : 0;
    result.outcome = term_sent ? RunOutcome::kCancelled : RunOutcome::kFailed;
    result.error =
        cancel_note + "killed by signal " + std::to_string(sig) + " (" + SignalName(sig) + ")";
    // Which limit ended it, when one did.
    if (sig == SIGXCPU && job.cpu_max > Duration(0)) {
      result.error += ": cpu_max " + FormatDuration(job.cpu_max) + " reached";
    } else if (cgroup && cgroup->OomKilled()) {
      result.error += ": memory_max " + std::to_string(job.memory_max) + " bytes reached";
    }
  }
  return result;
}

}  // namespace gnomon

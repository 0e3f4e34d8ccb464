// ProcessExecutor: fork/exec with a process group, one poll() loop per attempt.
//
// Between fork and exec the child may only call async-signal-safe functions (the parent is
// multi-threaded), so everything the child needs (paths, argv, envp) is built before the fork.
#include "gnomon/process_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "src/exec/output_tail.h"
#include "src/exec/posix_util.h"

extern char** environ;  // NOLINT: POSIX

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace gnomon {
namespace {

using exec_internal::ErrnoText;
using exec_internal::LineSplitter;
using exec_internal::OutputTail;
using exec_internal::SignalName;
using exec_internal::UniqueFd;

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";
// Output read per wake-up before looking at the other events again (a child that prints without
// pause must not delay its own cancellation).
constexpr int kMaxReadsPerWakeup = 16;

// What the child reports through the CLOEXEC pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { kSetpgid, kStdin, kStdout, kCloexec, kExec } stage;
  int err;
};

const char* StageName(ChildFailure::Stage stage) {
  switch (stage) {
    case ChildFailure::kSetpgid:
      return "setpgid";
    case ChildFailure::kStdin:
      return "redirect stdin from /dev/null";
    case ChildFailure::kStdout:
      return "redirect stdout/stderr";
    case ChildFailure::kCloexec:
      return "close inherited descriptors";
    case ChildFailure::kExec:
      return "exec";
  }
  return "start";
}

// Everything the child needs, built in the parent before the fork.
struct ExecPlan {
  std::string display;             // the program as the job named it, for errors
  std::vector<std::string> paths;  // execve candidates, in order (PATH search)
  std::vector<std::string> args;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<char*> argv_ptrs;
  std::vector<char*> envp_ptrs;
  int max_fd = 1024;     // for the close-on-exec fallback without close_range
  pid_t parent_pid = 0;  // the gnomon process (checked by the child after PR_SET_PDEATHSIG)
};

ExecResult Failed(std::string error) {
  ExecResult r;
  r.outcome = RunOutcome::kFailed;
  r.error = std::move(error);
  return r;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Builds the plan; an error string for a job that cannot be started.
std::optional<std::string> BuildPlan(const JobSpec& job, const RunContext& ctx,
                                     const std::string& shell, ExecPlan& plan) {
  const bool has_command = !job.command.empty();
  const bool has_argv = !job.argv.empty();
  if (has_command == has_argv) {
    return has_command ? "job \"" + job.id + "\": both command and argv are set"
                       : "job \"" + job.id + "\": neither command nor argv is set";
  }
  if (has_command) {
    if (HasNul(job.command)) return "command contains a NUL byte";
    plan.args = {shell, "-c", job.command};
  } else {
    plan.args = job.argv;
    for (size_t i = 0; i < plan.args.size(); ++i) {
      if (HasNul(plan.args[i])) return "argv[" + std::to_string(i) + "] contains a NUL byte";
    }
    if (plan.args[0].empty()) return "argv[0] is empty";
  }

  // Environment: the parent's, then job.env, then the run's variables.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.insert_or_assign(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  for (const auto& [key, value] : job.env) {
    if (key.empty() || key.find('=') != std::string::npos || HasNul(key)) {
      return "env: invalid variable name \"" + key + "\"";
    }
    if (HasNul(value)) return "env: " + key + " contains a NUL byte";
    env.insert_or_assign(key, value);
  }
  for (auto& [key, value] : RunEnvironment(ctx)) {
    // A NUL would silently cut the value short; cut it here, visibly the same way.
    env.insert_or_assign(std::move(key), value.substr(0, value.find('\0')));
  }
  plan.env.reserve(env.size());
  for (const auto& [key, value] : env) plan.env.push_back(key + "=" + value);

  // The program: a path as given, or a PATH search like execvp's (without its /bin/sh fallback).
  const std::string& program = plan.args[0];
  plan.display = program;
  if (program.find('/') != std::string::npos) {
    plan.paths = {program};
  } else {
    const auto it = env.find("PATH");
    const std::string_view path = it != env.end() ? std::string_view(it->second) : kDefaultPath;
    size_t start = 0;
    while (true) {
      const size_t colon = path.find(':', start);
      std::string dir(path.substr(start, colon == std::string_view::npos ? colon : colon - start));
      if (dir.empty()) dir = ".";
      plan.paths.push_back(dir + "/" + program);
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
  }

  for (std::string& a : plan.args) plan.argv_ptrs.push_back(a.data());
  plan.argv_ptrs.push_back(nullptr);
  for (std::string& e : plan.env) plan.envp_ptrs.push_back(e.data());
  plan.envp_ptrs.push_back(nullptr);
  const long open_max = sysconf(_SC_OPEN_MAX);
  plan.max_fd = open_max > 0 ? static_cast<int>(std::min<long>(open_max, 1 << 20)) : 1024;
  plan.parent_pid = getpid();
  return std::nullopt;
}

// A descriptor numbered 3 or above (so the child's dup2 onto 0-2 never clobbers it), CLOEXEC.
UniqueFd AboveStdio(UniqueFd fd) {
  if (!fd.valid() || fd.get() > 2) return fd;
  return UniqueFd(fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
}

// In the child: report why it could not exec, then exit. Async-signal-safe.
[[noreturn]] void ChildFail(int report_fd, ChildFailure::Stage stage, int err) {
  const ChildFailure failure{stage, err};
  if (write(report_fd, &failure, sizeof(failure)) < 0) {
    // Nothing left to report to; the parent sees exit status 127.
  }
  _exit(127);
}

// In the child, after fork: set up and exec. Only async-signal-safe calls.
[[noreturn]] void RunChild(const ExecPlan& plan, int out_fd, int report_fd) {
  // Signals: handlers of the parent must not run here, and ignored/blocked signals are not
  // inherited by the job. The parent blocked everything around the fork.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_DFL) {
      sa.sa_handler = SIG_DFL;
      sa.sa_flags = 0;
      sigaction(sig, &sa, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (setpgid(0, 0) != 0) ChildFail(report_fd, ChildFailure::kSetpgid, errno);
  // If the gnomon process dies (kill -9), the run dies with it rather than running on unowned
  // while the fire is resolved as lost (and perhaps re-run) elsewhere. The forking thread is a
  // worker that lives as long as the scheduler. If the parent already died, stop here.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.parent_pid) _exit(127);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0) ChildFail(report_fd, ChildFailure::kStdin, errno);
  if (null_fd != 0 && dup2(null_fd, 0) < 0) ChildFail(report_fd, ChildFailure::kStdin, errno);
  // out_fd and report_fd are >= 3 (AboveStdio), so these never clobber them.
  if (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) {
    ChildFail(report_fd, ChildFailure::kStdout, errno);
  }
  // Every descriptor above stderr closes at exec, including ones other threads of the parent
  // opened without O_CLOEXEC. report_fd stays open until the exec succeeds.
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < plan.max_fd; ++fd) {
      const int flags = fcntl(fd, F_GETFD);
      if (flags >= 0 && !(flags & FD_CLOEXEC)) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
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

// Kills and reaps the child on every path out of Execute (no zombies, nothing left running).
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() {
    if (pid_ > 0) {
      killpg(pid_, SIGKILL);
      Reap(/*block=*/true);
    }
  }

  // Collects the exit status; returns whether the child is gone (reaped, or not ours to reap).
  bool Reap(bool block) {
    while (true) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, block ? 0 : WNOHANG);
      if (r == pid_) {
        status_ = status;
        pid_ = -1;
        return true;
      }
      if (r == 0) return false;
      if (errno == EINTR) continue;
      pid_ = -1;  // ECHILD: reaped elsewhere (SIGCHLD ignored); the status is lost
      return true;
    }
  }
  std::optional<int> status() const { return status_; }

 private:
  pid_t pid_;
  std::optional<int> status_;
};

int PollTimeoutMs(std::optional<Duration> deadline, Duration now) {
  if (!deadline) return -1;
  const Duration left = *deadline - now;
  if (left <= Duration::zero()) return 0;
  return static_cast<int>(std::min<Duration::rep>(left.count(), INT_MAX));
}

}  // namespace

ProcessExecutor::ProcessExecutor(ProcessExecutorOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

ExecResult ProcessExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  ExecPlan plan;
  if (auto error = BuildPlan(job, ctx, options_.shell, plan)) return Failed(*error);

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
  if (!out_read.valid() || !out_write.valid() || !report_write.valid()) {
    return Failed("fcntl(F_DUPFD): " + ErrnoText(errno));
  }
  // Only our end is non-blocking; the child's writes block as usual when the pipe is full.
  fcntl(out_read.get(), F_SETFL, fcntl(out_read.get(), F_GETFL) | O_NONBLOCK);

  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = fork();
  if (pid == 0) RunChild(plan, out_write.get(), report_write.get());
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Failed("fork: " + ErrnoText(fork_errno));

  ChildGuard child(pid);
  // Also here, so that a killpg right after the fork already reaches the group (EACCES once the
  // child has exec'd is fine: it did it itself).
  setpgid(pid, pid);
  out_write.Reset();
  report_write.Reset();

  // Wait for the exec: the report pipe closes on success, or carries the child's errno.
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
    child.Reap(/*block=*/true);
    if (failure.stage == ChildFailure::kExec) {
      return Failed("exec " + plan.display + ": " + ErrnoText(failure.err));
    }
    return Failed(std::string(StageName(failure.stage)) + ": " + ErrnoText(failure.err));
  }

  UniqueFd pid_fd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pid_fd.valid()) {
    return Failed("pidfd_open (needs Linux 5.3+): " + ErrnoText(errno));  // the guard kills it
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
  bool exited = false;  // the main process exited (reaped only after the loop, so that
                        // its zombie keeps the group id reserved for killpg until then)
  bool stop_seen = false;
  bool term_sent = false;                  // cancellation began
  bool group_killed = false;               // SIGKILL went to the group
  bool grace_expired = false;              // ... because kill_grace ran out
  std::optional<Duration> kill_deadline;   // after SIGTERM
  std::optional<Duration> drain_deadline;  // after the group was killed
  std::vector<char> buf(64 * 1024);
  auto kill_group = [&] {
    killpg(pid, SIGKILL);
    group_killed = true;
    drain_deadline = clock_.SteadyNow() + options_.output_drain_timeout;
  };

  while (!exited || out_open) {
    pollfd fds[3];
    nfds_t n = 0;
    int out_idx = -1, pid_idx = -1, stop_idx = -1;
    if (out_open) {
      out_idx = static_cast<int>(n);
      fds[n++] = {out_read.get(), POLLIN, 0};
    }
    if (!exited) {
      pid_idx = static_cast<int>(n);
      fds[n++] = {pid_fd.get(), POLLIN, 0};
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
        term_sent = true;
        kill_deadline = clock_.SteadyNow() + kill_grace;
      } else {
        out_open = false;  // only processes that left the group still write: stop reading
      }
    }
    if (ready(pid_idx)) {
      exited = true;
      // The run is over: nothing it started may outlive it. During a cancellation the rest of
      // the group keeps its kill_grace.
      if (!term_sent && !group_killed) kill_group();
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
  killpg(pid, SIGKILL);  // whatever is left of the group (normally nothing)
  child.Reap(/*block=*/true);
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
  const std::optional<int> status = child.status();
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
  }
  return result;
}

}  // namespace gnomon

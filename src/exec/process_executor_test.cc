// Real child processes. Assertions are on what the run recorded (output, checkpoints, exit
// status, pidfds of the processes it started); time is only checked against generous bounds.
#include "gnomon/process_executor.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "src/exec/posix_util.h"
#include "src/exec/test_util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace gnomon {
namespace {

using exec_internal::UniqueFd;
using exec_testing::CheckpointRecorder;
using exec_testing::FullContext;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

JobSpec CommandJob(std::string command) {
  JobSpec job;
  job.id = "job-1";
  job.command = std::move(command);
  return job;
}

JobSpec ArgvJob(std::vector<std::string> argv) {
  JobSpec job;
  job.id = "job-1";
  job.argv = std::move(argv);
  return job;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Duration Now() { return SystemClock::Get().SteadyNow(); }

// A directory of this test process's own (tests of several processes may run at once).
std::string UniqueTempDir() {
  const std::string dir = ::testing::TempDir() + "/gnomon-exec-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

// A pidfd for `pid` (not necessarily our child), opened while it runs.
UniqueFd OpenPidfd(pid_t pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
}

// Whether the process behind `pidfd` exits within `limit` (event-driven: the pidfd becomes
// readable when it exits).
bool ExitsWithin(const UniqueFd& pidfd, Duration limit) {
  pollfd p{pidfd.get(), POLLIN, 0};
  return poll(&p, 1, static_cast<int>(limit.count())) == 1;
}

// Live (not zombie) processes whose process group is `pgid`.
std::vector<pid_t> LiveGroupMembers(pid_t pgid) {
  std::vector<pid_t> members;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid pgrp ...; comm may contain spaces, so parse after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') members.push_back(std::stoi(name));
  }
  return members;
}

// Whether every process of group `pgid` has exited within `limit` (zombies count as gone).
// Event-driven: waits on the pidfds of the members it finds, then looks again.
bool GroupGoneWithin(pid_t pgid, Duration limit) {
  const Duration deadline = Now() + limit;
  while (true) {
    const std::vector<pid_t> members = LiveGroupMembers(pgid);
    if (members.empty()) return true;
    for (const pid_t pid : members) {
      const UniqueFd pidfd = OpenPidfd(pid);  // invalid if it is already gone
      if (pidfd.valid() && !ExitsWithin(pidfd, std::max(deadline - Now(), Duration::zero()))) {
        return false;
      }
    }
  }
}

class ProcessExecutorTest : public ::testing::Test {
 protected:
  ProcessExecutor executor_;
};

TEST_F(ProcessExecutorTest, ChildSeesParentJobAndRunEnvironment) {
  ASSERT_EQ(setenv("GNOMON_EXEC_TEST_PARENT", "from-parent", 1), 0);
  JobSpec job = CommandJob("env");
  job.env = {
      {"JOB_VAR", "job value"}, {"GNOMON_JOB_ID", "spoofed"}, {"GNOMON_EXEC_TEST_PARENT", "job"}};
  const ExecResult r = executor_.Execute(job, FullContext());
  unsetenv("GNOMON_EXEC_TEST_PARENT");
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(Lines(r.output), IsSupersetOf(std::vector<std::string>{
                                   "GNOMON_JOB_ID=job-1",
                                   "GNOMON_RUN_ID=job-1@1795987800000#1",
                                   "GNOMON_SCHEDULED_AT=2026-11-29T21:30:00.000Z",
                                   "GNOMON_FENCING_TOKEN=42",
                                   "GNOMON_ATTEMPT=2",
                                   "GNOMON_NODE_ID=node-a",
                                   "GNOMON_SHARD_INDEX=1",
                                   "GNOMON_SHARD_COUNT=3",
                                   "GNOMON_DEADLINE=2026-11-29T21:31:00.250Z",
                                   "GNOMON_CHECKPOINT=cp-7",
                                   std::string("GNOMON_TRACEPARENT=") + exec_testing::kTraceparent,
                                   R"(GNOMON_PARAMS={"month":"2026-11","dry_run":true})",
                                   "JOB_VAR=job value",
                                   "GNOMON_EXEC_TEST_PARENT=job",
                               }));
  EXPECT_THAT(r.output, Not(HasSubstr("spoofed")));
  EXPECT_THAT(r.output, HasSubstr("\nPATH="));
}

// The daemon's environment (its secrets) is not the run's: only PATH, LANG and TZ, the run
// user's HOME/USER/LOGNAME, the names in inherit_env, the job's env and the GNOMON_* variables.
TEST_F(ProcessExecutorTest, TheDaemonsEnvironmentIsNotInherited) {
  ASSERT_EQ(setenv("GNOMON_EXEC_TEST_SECRET", "hunter2", 1), 0);
  ASSERT_EQ(setenv("GNOMON_EXEC_TEST_SHARED", "shared-value", 1), 0);
  ASSERT_EQ(setenv("LANG", "C.UTF-8", 1), 0);
  JobSpec job = CommandJob("env");
  job.inherit_env = {"GNOMON_EXEC_TEST_SHARED", "GNOMON_EXEC_TEST_ABSENT"};
  const ExecResult r = executor_.Execute(job, FullContext());
  ProcessExecutorOptions all;
  all.inherit_environment = true;
  ProcessExecutor inheriting(all);
  const ExecResult everything = inheriting.Execute(CommandJob("env"), FullContext());
  unsetenv("GNOMON_EXEC_TEST_SECRET");
  unsetenv("GNOMON_EXEC_TEST_SHARED");
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_THAT(r.output, Not(HasSubstr("hunter2")));
  EXPECT_THAT(Lines(r.output), IsSupersetOf(std::vector<std::string>{
                                   "GNOMON_EXEC_TEST_SHARED=shared-value", "LANG=C.UTF-8"}));
  EXPECT_THAT(r.output, Not(HasSubstr("GNOMON_EXEC_TEST_ABSENT")));
  EXPECT_THAT(r.output, HasSubstr("\nPATH="));
  EXPECT_THAT(r.output, HasSubstr("\nHOME="));
  EXPECT_THAT(r.output, HasSubstr("\nUSER="));
  EXPECT_THAT(r.output, HasSubstr("\nLOGNAME="));
  // Names outside the list: only the run's variables and the fixed ones.
  for (const std::string& line : Lines(r.output)) {
    const std::string name = line.substr(0, line.find('='));
    static const std::set<std::string> kAllowed = {
        "PATH", "LANG",  "TZ", "HOME",  "USER", "LOGNAME", "GNOMON_EXEC_TEST_SHARED",
        "PWD",  "SHLVL", "_",  "OLDPWD"};  // the last four are the shell's own
    EXPECT_TRUE(kAllowed.count(name) || name.rfind("GNOMON_", 0) == 0) << line;
  }
  // Embedders may ask for the whole environment.
  EXPECT_THAT(everything.output, HasSubstr("GNOMON_EXEC_TEST_SECRET=hunter2"));
}

TEST_F(ProcessExecutorTest, ArgvIsPassedVerbatimWithoutAShell) {
  const std::string tricky = "a; echo injected $(echo sub) `id` * $HOME";
  const ExecResult r = executor_.Execute(ArgvJob({"printf", "[%s]\\n", tricky}), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "[" + tricky + "]\n");
}

TEST_F(ProcessExecutorTest, CommandRunsThroughTheShell) {
  const ExecResult r =
      executor_.Execute(CommandJob("echo $((1 + 2)) $GNOMON_ATTEMPT"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "3 2\n");
}

TEST_F(ProcessExecutorTest, StdoutAndStderrAreCapturedTogether) {
  const ExecResult r =
      executor_.Execute(CommandJob("echo out; echo err >&2; echo out2"), FullContext());
  EXPECT_EQ(r.output, "out\nerr\nout2\n");
}

TEST_F(ProcessExecutorTest, StdinIsDevNull) {
  const ExecResult r = executor_.Execute(CommandJob("cat; echo done"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "done\n");
}

TEST_F(ProcessExecutorTest, KeepsTheLast64KiBOfHugeOutput) {
  // seq prints ~15 MB; only the tail is kept.
  constexpr int kCount = 2'000'000;
  const ExecResult r =
      executor_.Execute(CommandJob("seq 1 " + std::to_string(kCount)), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  std::string tail;
  for (int i = kCount; tail.size() < kMaxOutputBytes; --i) tail = std::to_string(i) + "\n" + tail;
  tail = tail.substr(tail.size() - kMaxOutputBytes);
  ASSERT_EQ(r.output.size(), kMaxOutputBytes);
  EXPECT_EQ(r.output, tail);
}

TEST_F(ProcessExecutorTest, NonZeroExitFails) {
  const ExecResult r = executor_.Execute(CommandJob("echo partial; exit 3"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.error, "exited with status 3");
  EXPECT_EQ(r.output, "partial\n");
}

TEST_F(ProcessExecutorTest, DeathBySignalNamesTheSignal) {
  const ExecResult r = executor_.Execute(CommandJob("kill -SEGV $$"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.error, "killed by signal 11 (SIGSEGV)");
}

TEST_F(ProcessExecutorTest, MissingBinaryFailsWithTheReason) {
  ExecResult r =
      executor_.Execute(ArgvJob({"/nonexistent/gnomon-no-such-binary", "x"}), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_THAT(r.error,
              HasSubstr("exec /nonexistent/gnomon-no-such-binary: No such file or directory"));

  r = executor_.Execute(ArgvJob({"gnomon-no-such-binary-on-path"}), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("exec gnomon-no-such-binary-on-path: No such file or directory"));
}

TEST_F(ProcessExecutorTest, NonExecutableFileFails) {
  const std::string path = UniqueTempDir() + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  const ExecResult r = executor_.Execute(ArgvJob({path}), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("Permission denied"));
  std::filesystem::remove(path);
}

TEST_F(ProcessExecutorTest, JobPathIsUsedForTheSearch) {
  const std::string dir = UniqueTempDir();
  const std::string path = dir + "/gnomon-exec-hello";
  std::ofstream(path) << "#!/bin/sh\necho hello \"$1\"\n";
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  JobSpec job = ArgvJob({"gnomon-exec-hello", "world"});
  job.env["PATH"] = "/nonexistent:" + dir;
  const ExecResult r = executor_.Execute(job, FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "hello world\n");
  std::filesystem::remove(path);
}

TEST_F(ProcessExecutorTest, OtherDescriptorsAreNotInherited) {
  const int leaked = open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 0);
  const std::string fd = std::to_string(leaked);
  const ExecResult r =
      executor_.Execute(CommandJob("for fd in 0 1 2 " + fd +
                                   "; do [ -e /proc/$$/fd/$fd ] && echo $fd:open || "
                                   "echo $fd:closed; done"),
                        FullContext());
  close(leaked);
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "0:open\n1:open\n2:open\n" + fd + ":closed\n");
}

TEST_F(ProcessExecutorTest, InvalidJobsFailWithoutStarting) {
  JobSpec both = CommandJob("true");
  both.argv = {"true"};
  EXPECT_THAT(executor_.Execute(both, FullContext()).error, HasSubstr("both command and argv"));
  JobSpec none;
  none.id = "job-1";
  EXPECT_THAT(executor_.Execute(none, FullContext()).error, HasSubstr("neither"));
  JobSpec bad_env = CommandJob("true");
  bad_env.env["A=B"] = "x";
  EXPECT_THAT(executor_.Execute(bad_env, FullContext()).error, HasSubstr("invalid variable name"));
}

TEST_F(ProcessExecutorTest, CheckpointLinesAreSavedAndKept) {
  RunContext ctx = FullContext();
  CheckpointRecorder recorder;
  recorder.Attach(ctx);
  const ExecResult r = executor_.Execute(
      CommandJob("echo before; echo '::gnomon-checkpoint step-1'; "
                 "echo 'x ::gnomon-checkpoint not-one'; echo '::gnomon-checkpoint  two words ' >&2;"
                 "printf '::gnomon-checkpoint last'"),
      ctx);
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_THAT(recorder.values(), ElementsAre("step-1", " two words ", "last"));
  EXPECT_EQ(r.output,
            "before\n::gnomon-checkpoint step-1\nx ::gnomon-checkpoint not-one\n"
            "::gnomon-checkpoint  two words \n::gnomon-checkpoint last");
}

// Runs `job` on a thread; the test cancels it once the child has saved `ready_count` checkpoints.
struct CancelledRun {
  ExecResult result;
  Duration stop_requested_at{0};
  Duration returned_at{0};
  std::vector<std::string> checkpoints;
};

CancelledRun RunAndCancel(ProcessExecutor& executor, const JobSpec& job, size_t ready_count,
                          CheckpointRecorder& recorder) {
  RunContext ctx = FullContext();
  std::stop_source stop;
  ctx.stop = stop.get_token();
  recorder.Attach(ctx);
  CancelledRun run;
  std::jthread runner([&] {
    run.result = executor.Execute(job, ctx);
    run.returned_at = Now();
  });
  EXPECT_TRUE(recorder.Wait(ready_count)) << "the child never became ready";
  run.stop_requested_at = Now();
  stop.request_stop();
  runner.join();
  run.checkpoints = recorder.values();
  return run;
}

TEST_F(ProcessExecutorTest, CancelSendsTermThenKillAfterGrace) {
  // A loop of builtins, so that the shell runs its trap as soon as TERM arrives.
  JobSpec job =
      CommandJob("trap 'echo got-term' TERM; echo ::gnomon-checkpoint ready; while :; do :; done");
  job.kill_grace = std::chrono::milliseconds(500);
  CheckpointRecorder recorder;
  const CancelledRun run = RunAndCancel(executor_, job, 1, recorder);
  EXPECT_EQ(run.result.outcome, RunOutcome::kCancelled);
  // The shell trapped TERM (so it was delivered first), and was then killed by SIGKILL.
  EXPECT_THAT(run.result.output, HasSubstr("got-term"));
  EXPECT_EQ(run.result.error,
            "cancelled: sent SIGTERM to the process group, then SIGKILL after kill_grace 500ms; "
            "killed by signal 9 (SIGKILL)");
  // SIGKILL cannot come before the grace; the upper bound is generous.
  EXPECT_GE(run.returned_at - run.stop_requested_at, std::chrono::milliseconds(500));
  EXPECT_LT(run.returned_at - run.stop_requested_at, std::chrono::seconds(20));
}

TEST_F(ProcessExecutorTest, CancelOfAChildThatObeysTermDoesNotWaitForTheGrace) {
  JobSpec job = CommandJob("echo ::gnomon-checkpoint ready; sleep 1000");
  job.kill_grace = std::chrono::seconds(60);
  CheckpointRecorder recorder;
  const CancelledRun run = RunAndCancel(executor_, job, 1, recorder);
  EXPECT_EQ(run.result.outcome, RunOutcome::kCancelled);
  EXPECT_EQ(run.result.error,
            "cancelled: sent SIGTERM to the process group; killed by signal 15 (SIGTERM)");
  EXPECT_LT(run.returned_at - run.stop_requested_at, std::chrono::seconds(20));
}

TEST_F(ProcessExecutorTest, DescendantsKeepTheGraceAfterTheMainProcessDies) {
  // The leader dies of SIGTERM at once; its child traps TERM, cleans up and exits within the
  // grace. Its output is kept and nothing waits for the 60 s grace.
  JobSpec job = CommandJob(
      "(trap 'echo child-cleanup; exit 0' TERM; echo ::gnomon-checkpoint ready; "
      "while :; do :; done) & wait");
  job.kill_grace = std::chrono::seconds(60);
  CheckpointRecorder recorder;
  const CancelledRun run = RunAndCancel(executor_, job, 1, recorder);
  EXPECT_EQ(run.result.outcome, RunOutcome::kCancelled);
  EXPECT_THAT(run.result.output, HasSubstr("child-cleanup"));
  EXPECT_LT(run.returned_at - run.stop_requested_at, std::chrono::seconds(20));
}

TEST_F(ProcessExecutorTest, CancelKillsTheWholeProcessGroup) {
  // The leader waits for a background sleep; a second grandchild ignores SIGTERM, so only the
  // group SIGKILL at the end of kill_grace, after the leader is gone, can end it.
  JobSpec job = CommandJob(
      "sleep 1000 & echo ::gnomon-checkpoint $$; echo ::gnomon-checkpoint $!; "
      // Announces itself only once TERM is ignored (SIG_IGN survives the exec).
      "sh -c 'trap \"\" TERM; echo ::gnomon-checkpoint $$; exec sleep 1000' & wait");
  job.kill_grace = std::chrono::milliseconds(300);
  CheckpointRecorder recorder;
  std::vector<UniqueFd> pidfds;
  pid_t pgid = -1;  // the run's process group, looked up while its first process runs
  recorder.OnSave([&](const std::string& pid) {
    pidfds.push_back(OpenPidfd(std::stoi(pid)));
    if (pgid < 0) pgid = getpgid(std::stoi(pid));
  });
  const CancelledRun run = RunAndCancel(executor_, job, 3, recorder);
  EXPECT_EQ(run.result.outcome, RunOutcome::kCancelled) << run.result.error;
  ASSERT_EQ(pidfds.size(), 3u);
  for (size_t i = 0; i < pidfds.size(); ++i) {
    ASSERT_TRUE(pidfds[i].valid()) << run.checkpoints[i];
    EXPECT_TRUE(ExitsWithin(pidfds[i], std::chrono::seconds(10))) << "pid " << run.checkpoints[i];
  }
  ASSERT_GT(pgid, 0);
  EXPECT_TRUE(GroupGoneWithin(pgid, std::chrono::seconds(10))) << "group " << pgid;
  EXPECT_GE(run.returned_at - run.stop_requested_at, std::chrono::milliseconds(300));
  EXPECT_LT(run.returned_at - run.stop_requested_at, std::chrono::seconds(20));
  EXPECT_EQ(run.result.error,
            "cancelled: sent SIGTERM to the process group, then SIGKILL after kill_grace 300ms; "
            "killed by signal 15 (SIGTERM)");
}

TEST_F(ProcessExecutorTest, ProcessesLeftBehindAreKilledWhenTheMainProcessExits) {
  RunContext ctx = FullContext();
  CheckpointRecorder recorder;
  std::vector<UniqueFd> pidfds;
  recorder.OnSave([&](const std::string& pid) { pidfds.push_back(OpenPidfd(std::stoi(pid))); });
  recorder.Attach(ctx);
  const Duration start = Now();
  const ExecResult r =
      executor_.Execute(CommandJob("sleep 1000 & echo ::gnomon-checkpoint $!; exit 0"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_LT(Now() - start, std::chrono::seconds(20));
  ASSERT_EQ(pidfds.size(), 1u);
  ASSERT_TRUE(pidfds[0].valid());
  EXPECT_TRUE(ExitsWithin(pidfds[0], std::chrono::seconds(10)));
}

// A child that starts its own session (setsid), double-forks or ignores SIGTERM does not outlive
// its run: the supervisor is a subreaper (or the run a cgroup) and the end of the run walks the
// whole tree.
TEST_F(ProcessExecutorTest, ChildrenThatEscapeTheGroupEndWithTheRun) {
  RunContext ctx = FullContext();
  CheckpointRecorder recorder;
  std::vector<UniqueFd> pidfds;
  recorder.OnSave([&](const std::string& pid) { pidfds.push_back(OpenPidfd(std::stoi(pid))); });
  recorder.Attach(ctx);
  const ExecResult r = executor_.Execute(
      CommandJob("setsid sh -c 'echo ::gnomon-checkpoint $$; exec sleep 1000' & "
                 // a double fork: the middle process exits, the grandchild is an orphan
                 "sh -c 'setsid sh -c \"trap \\\"\\\" TERM; echo ::gnomon-checkpoint \\$\\$; "
                 "exec sleep 1000\" & exit 0'; "
                 "sleep 0.3; exit 0"),
      ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  ASSERT_EQ(pidfds.size(), 2u) << r.output;
  for (size_t i = 0; i < pidfds.size(); ++i) {
    ASSERT_TRUE(pidfds[i].valid());
    EXPECT_TRUE(ExitsWithin(pidfds[i], std::chrono::seconds(10))) << "escaped pid " << i;
  }
}

TEST_F(ProcessExecutorTest, CancelReachesChildrenThatLeftTheGroupAndIgnoreTerm) {
  JobSpec job = CommandJob(
      "setsid sh -c 'trap \"\" TERM; echo ::gnomon-checkpoint $$; exec sleep 1000' & "
      "echo ::gnomon-checkpoint ready; wait");
  job.kill_grace = std::chrono::milliseconds(300);
  CheckpointRecorder recorder;
  std::vector<UniqueFd> pidfds;
  recorder.OnSave([&](const std::string& v) {
    if (v != "ready") pidfds.push_back(OpenPidfd(std::stoi(v)));
  });
  const CancelledRun run = RunAndCancel(executor_, job, 2, recorder);
  EXPECT_EQ(run.result.outcome, RunOutcome::kCancelled) << run.result.error;
  ASSERT_EQ(pidfds.size(), 1u);
  ASSERT_TRUE(pidfds[0].valid());
  EXPECT_TRUE(ExitsWithin(pidfds[0], std::chrono::seconds(10)));
}

TEST_F(ProcessExecutorTest, ContainmentIsNamed) {
  EXPECT_THAT(executor_.containment(),
              ::testing::AnyOf(HasSubstr("cgroup v2"), HasSubstr("child subreaper")));
  ProcessExecutorOptions no_cgroups;
  no_cgroups.use_cgroups = false;
  ProcessExecutor subreaper(no_cgroups);
  EXPECT_THAT(subreaper.containment(), HasSubstr("child subreaper"));
  // Without cgroups the same escapes are caught by the tree walk.
  RunContext ctx = FullContext();
  CheckpointRecorder recorder;
  std::vector<UniqueFd> pidfds;
  recorder.OnSave([&](const std::string& pid) { pidfds.push_back(OpenPidfd(std::stoi(pid))); });
  recorder.Attach(ctx);
  const ExecResult r = subreaper.Execute(
      CommandJob("setsid sh -c 'echo ::gnomon-checkpoint $$; exec sleep 1000' & sleep 0.2"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  ASSERT_EQ(pidfds.size(), 1u);
  EXPECT_TRUE(ExitsWithin(pidfds[0], std::chrono::seconds(10)));
}

// With cgroup v2 (where this process may create cgroups), the run's processes are in the run's
// own cgroup.
TEST_F(ProcessExecutorTest, RunsAreInTheirOwnCgroupWhenThereIsOne) {
  if (executor_.containment().find("cgroup v2") == std::string::npos) {
    GTEST_SKIP() << "no usable cgroup v2 hierarchy here: " << executor_.containment();
  }
  const ExecResult r = executor_.Execute(CommandJob("cat /proc/self/cgroup"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("0::.*/gnomon-runs-[0-9]+-[0-9]+/run-[0-9]+"));
}

// A daemon killed with -9 leaves its run cgroups behind; a later daemon with the same pid takes
// their names over: the orphans in them are ended and the run starts.
TEST_F(ProcessExecutorTest, AStaleRunCgroupOfAnEarlierProcessIsTakenOver) {
  const std::string& mechanism = executor_.containment();
  if (mechanism.find("cgroup v2 (") == std::string::npos) {
    GTEST_SKIP() << "no usable cgroup v2 hierarchy here: " << mechanism;
  }
  const size_t open = mechanism.find('(') + 1;
  const std::string base = mechanism.substr(open, mechanism.find(';', open) - open);
  ExecResult r = executor_.Execute(CommandJob("cat /proc/self/cgroup"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  const size_t at = r.output.rfind("/run-");
  ASSERT_NE(at, std::string::npos) << r.output;
  const int next = std::stoi(r.output.substr(at + 5)) + 1;
  // The name the next run takes, left behind with an orphan process in it.
  const std::string stale = base + "/run-" + std::to_string(next);
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0) << stale << ": " << std::strerror(errno);
  const pid_t orphan = ::fork();
  ASSERT_GE(orphan, 0);
  if (orphan == 0) {
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  {
    std::ofstream procs(stale + "/cgroup.procs");
    procs << orphan;
  }
  r = executor_.Execute(CommandJob("echo taken-over"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "taken-over\n");
  // The orphan was ended (and if not, it is, so that the test fails rather than waits).
  int status = 0;
  pid_t ended = ::waitpid(orphan, &status, WNOHANG);
  if (ended == 0) {
    ::kill(orphan, SIGKILL);
    ::waitpid(orphan, &status, 0);
  }
  EXPECT_EQ(ended, orphan) << "the orphan in the stale cgroup still ran";
}

// run_as switches user, group and supplementary groups (the tests run as root).
TEST_F(ProcessExecutorTest, RunAsSwitchesUserAndGroups) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  JobSpec job = CommandJob("id -u; id -g; id -G; echo $HOME $USER $LOGNAME; pwd");
  job.run_as = "nobody";
  ExecResult r = executor_.Execute(job, FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  const std::vector<std::string> lines = Lines(r.output);
  ASSERT_GE(lines.size(), 5u) << r.output;
  EXPECT_EQ(lines[0], "65534");
  EXPECT_EQ(lines[2].find(" 0"), std::string::npos) << "no root group left: " << lines[2];
  EXPECT_NE(lines[2], "0");
  EXPECT_THAT(lines[3], HasSubstr("nobody nobody"));
  job.run_as = "nobody:" + std::to_string(getgid() == 0 ? 65534 : 65534);
  r = executor_.Execute(job, FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(Lines(r.output)[1], "65534");
  // It cannot read what only root can.
  JobSpec secret = CommandJob("cat /proc/1/environ > /dev/null && echo read || echo denied");
  secret.run_as = "nobody";
  EXPECT_THAT(executor_.Execute(secret, FullContext()).output, HasSubstr("denied"));
  // Unknown users fail the attempt, naming them.
  job.run_as = "no-such-user-gnomon";
  r = executor_.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("no user \"no-such-user-gnomon\""));
}

// Limits: open_files, memory_max (RLIMIT_AS unless a memory controller is delegated), cpu_max
// (SIGXCPU, named in the error).
TEST_F(ProcessExecutorTest, LimitsAreAppliedAndNamed) {
  JobSpec job = CommandJob("ulimit -n; ulimit -v; ulimit -t");
  job.open_files = 64;
  job.memory_max = int64_t{512} << 20;
  job.cpu_max = std::chrono::seconds(7);
  ExecResult r = executor_.Execute(job, FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  std::vector<std::string> lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[0], "64");
  if (executor_.containment().find("memory.max") == std::string::npos) {
    EXPECT_EQ(lines[1], std::to_string(512 * 1024));  // KiB
  }
  EXPECT_EQ(lines[2], "7");
  JobSpec spin = CommandJob("while :; do :; done");
  spin.cpu_max = std::chrono::seconds(1);
  r = executor_.Execute(spin, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("SIGXCPU"));
  EXPECT_THAT(r.error, HasSubstr("cpu_max 1s reached"));
}

TEST_F(ProcessExecutorTest, StopBeforeStartRunsNothing) {
  RunContext ctx = FullContext();
  std::stop_source stop;
  ctx.stop = stop.get_token();
  stop.request_stop();
  const ExecResult r = executor_.Execute(CommandJob("echo ran"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kCancelled);
  EXPECT_EQ(r.output, "");
}

TEST_F(ProcessExecutorTest, ConcurrentRunsKeepTheirOwnOutput) {
  constexpr int kRuns = 8;
  std::vector<ExecResult> results(kRuns);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kRuns; ++i) {
      threads.emplace_back([&, i] {
        RunContext ctx = FullContext();
        ctx.run_id = "run-" + std::to_string(i);
        results[i] = executor_.Execute(CommandJob("echo $GNOMON_RUN_ID"), ctx);
      });
    }
  }
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_EQ(results[i].outcome, RunOutcome::kSucceeded) << results[i].error;
    EXPECT_EQ(results[i].output, "run-" + std::to_string(i) + "\n");
  }
}

TEST_F(ProcessExecutorTest, LeavesNoZombies) {
  // Every way an attempt can end, then: this process has no children left at all.
  executor_.Execute(CommandJob("true"), FullContext());
  executor_.Execute(CommandJob("exit 4"), FullContext());
  executor_.Execute(CommandJob("kill -KILL $$"), FullContext());
  executor_.Execute(ArgvJob({"/nonexistent/x"}), FullContext());
  executor_.Execute(CommandJob("sleep 1000 & exit 0"), FullContext());
  JobSpec job = CommandJob("echo ::gnomon-checkpoint ready; sleep 1000");
  CheckpointRecorder recorder;
  RunAndCancel(executor_, job, 1, recorder);
  int status = 0;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(ProcessExecutorTest, AStrayHolderDeathSignalDoesNotEndTheRun) {
  // The supervisor that leads the run's group is woken by SIGUSR2 when the gnomon process dies;
  // the same signal sent by the job to its own group must not be taken for that.
  const ExecResult r =
      executor_.Execute(CommandJob("trap '' USR2; kill -USR2 0; echo alive"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "alive\n");
}

TEST_F(ProcessExecutorTest, ExitStatusIsKeptWhenSigchldIsIgnored) {
  // An embedder may ignore SIGCHLD (its children are then reaped by the kernel, statuses lost);
  // the job's status still comes from its supervisor.
  struct sigaction ignore = {}, saved = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &saved), 0);
  const ExecResult r = executor_.Execute(CommandJob("exit 3"), FullContext());
  sigaction(SIGCHLD, &saved, nullptr);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.error, "exited with status 3");
}

// Reads up to `n` lines from `fd`, waiting at most `limit` in all; fewer if the writer is gone.
std::vector<std::string> ReadLines(int fd, size_t n, Duration limit) {
  const Duration deadline = Now() + limit;
  std::vector<std::string> lines;
  std::string text;
  while (lines.size() < n) {
    const auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Now()).count();
    if (left_ms <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left_ms));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    char buf[256];
    const ssize_t got = read(fd, buf, sizeof(buf));
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
    for (size_t nl; lines.size() < n && (nl = text.find('\n')) != std::string::npos;) {
      lines.push_back(text.substr(0, nl));
      text.erase(0, nl + 1);
    }
  }
  return lines;
}

// A separate process that runs one job with a ProcessExecutor (the run's holder, standing in for
// a gnomon node), so that the test can kill -9 it. Each checkpoint the job saves is written, one
// a line, to `checkpoints`. Killed and reaped on destruction if still running.
class Holder {
 public:
  // Starts the holder; it requests the run's stop once `cancel_after` checkpoints were saved
  // (0: never).
  Holder(const JobSpec& job, size_t cancel_after) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      // The test process is single-threaded here; the holder only runs the executor and exits.
      close(fds[0]);
      ProcessExecutor executor;
      RunContext ctx = FullContext();
      std::stop_source stop;
      ctx.stop = stop.get_token();
      size_t saved = 0;
      ctx.save_checkpoint = [&](const std::string& value) {
        const std::string line = value + "\n";
        if (write(fds[1], line.data(), line.size()) < 0) _exit(3);
        if (++saved == cancel_after) stop.request_stop();
        return Status::Ok();
      };
      executor.Execute(job, ctx);
      _exit(0);
    }
    close(fds[1]);
    checkpoints_ = UniqueFd(fds[0]);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  ~Holder() { static_cast<void>(KillAndReap()); }

  pid_t pid() const { return pid_; }
  int checkpoints() const { return checkpoints_.get(); }

  // kill -9, then reaps it; returns its wait status (-1 if there was nothing to kill).
  int KillAndReap() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGKILL);
    int status = -1;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  UniqueFd checkpoints_;
};

// The parent pid of `pid`, from /proc; -1 if it is gone.
pid_t ParentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

TEST(ProcessExecutorHolderDeathTest, KillingTheHolderKillsTheWholeRun) {
  // The shell's background sleep is a grandchild of the run: PR_SET_PDEATHSIG on the shell alone
  // would leave it running, unowned, while another node takes the fire over.
  Holder holder(CommandJob("sleep 300 & echo ::gnomon-checkpoint $!; echo ::gnomon-checkpoint $$; "
                           "sleep 300"),
                /*cancel_after=*/0);
  ASSERT_GT(holder.pid(), 0);
  const std::vector<std::string> pids =
      ReadLines(holder.checkpoints(), 2, std::chrono::seconds(20));
  ASSERT_EQ(pids.size(), 2u) << "the job never reported its processes";
  const pid_t grandchild = std::stoi(pids[0]);
  const pid_t shell = std::stoi(pids[1]);
  const pid_t pgid = getpgid(shell);
  ASSERT_GT(pgid, 0);
  EXPECT_EQ(getpgid(grandchild), pgid);
  EXPECT_NE(pgid, shell);                   // the group is led by the supervisor ...
  EXPECT_EQ(ParentOf(pgid), holder.pid());  // ... a child of the holder
  std::vector<UniqueFd> pidfds;
  for (const pid_t pid : {grandchild, shell, pgid}) {
    pidfds.push_back(OpenPidfd(pid));
    ASSERT_TRUE(pidfds.back().valid()) << "pid " << pid << " is not running";
  }

  const int status = holder.KillAndReap();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  const std::vector<pid_t> named = {grandchild, shell, pgid};
  for (size_t i = 0; i < pidfds.size(); ++i) {
    EXPECT_TRUE(ExitsWithin(pidfds[i], std::chrono::seconds(20))) << "pid " << named[i];
  }
  // The foreground sleep was never named; nothing at all is left in the group.
  EXPECT_TRUE(GroupGoneWithin(pgid, std::chrono::seconds(20))) << "group " << pgid;
}

TEST(ProcessExecutorHolderDeathTest, KillingTheHolderDuringKillGraceKillsWhatIsLeft) {
  // Cancelled: the main shell dies of SIGTERM at once, a child that ignores SIGTERM is left for
  // the long kill_grace. The holder dies then: the child must not outlive it.
  JobSpec job = CommandJob(
      "sh -c 'trap \"\" TERM; echo ::gnomon-checkpoint child:$$; exec sleep 300' & "
      "echo ::gnomon-checkpoint main:$$; wait");
  job.kill_grace = std::chrono::seconds(300);
  Holder holder(job, /*cancel_after=*/2);
  ASSERT_GT(holder.pid(), 0);
  const std::vector<std::string> lines =
      ReadLines(holder.checkpoints(), 2, std::chrono::seconds(20));
  ASSERT_EQ(lines.size(), 2u) << "the job never reported its processes";
  pid_t main_pid = -1, child_pid = -1;
  for (const std::string& line : lines) {
    (line.rfind("main:", 0) == 0 ? main_pid : child_pid) =
        std::stoi(line.substr(line.find(':') + 1));
  }
  UniqueFd main_fd = OpenPidfd(main_pid);
  UniqueFd child_fd = OpenPidfd(child_pid);
  const pid_t pgid = getpgid(child_pid);
  ASSERT_TRUE(child_fd.valid());
  ASSERT_GT(pgid, 0);
  // The stop was requested with the second checkpoint: the main shell goes (it may be gone
  // already, then there is no pidfd), the child stays.
  if (main_fd.valid()) {
    ASSERT_TRUE(ExitsWithin(main_fd, std::chrono::seconds(20))) << "SIGTERM never came";
  }
  ASSERT_FALSE(ExitsWithin(child_fd, Duration::zero()));

  holder.KillAndReap();
  EXPECT_TRUE(ExitsWithin(child_fd, std::chrono::seconds(20))) << "pid " << child_pid;
  EXPECT_TRUE(GroupGoneWithin(pgid, std::chrono::seconds(20))) << "group " << pgid;
}

}  // namespace
}  // namespace gnomon

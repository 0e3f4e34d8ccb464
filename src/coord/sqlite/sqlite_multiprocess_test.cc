// Several processes, each with its own SqliteCoordinator on one file, race to claim the same
// fires: the file lock and the (job, scheduled, shard) key must give each fire exactly one claim.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gnomon/sqlite_coordinator.h"
#include "gnomon/testing/fake_clock.h"

namespace gnomon {
namespace {

constexpr int kChildren = 4;
constexpr int kFires = 300;

// What a child writes to its pipe when done.
struct ChildReport {
  int claimed = 0;
  int already_claimed = 0;
  int errors = 0;
};

FireKey FireAt(Instant base, int i) {
  FireKey f;
  f.job_id = "race";
  f.scheduled_at = base + std::chrono::seconds(i);
  return f;
}

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The child's whole life: open, wait for the start signal, race, report, _exit. Never returns.
[[noreturn]] void RunChild(const std::string& path, int index, int go_fd, int report_fd) {
  testing::FakeClock clock;  // same start instant as the parent's
  const Instant base = clock.Now() - std::chrono::hours(1);
  Result<std::unique_ptr<SqliteCoordinator>> coord = SqliteCoordinator::Open(path, clock);
  if (!coord.ok()) _exit(3);
  char go = 0;
  if (!ReadAll(go_fd, &go, 1)) _exit(4);
  ChildReport report;
  for (int i = 0; i < kFires; ++i) {
    const int f = index % 2 == 0 ? i : kFires - 1 - i;
    ClaimRequest req;
    req.fire = FireAt(base, f);
    req.node_id = "proc-" + std::to_string(index);
    req.overlap = OverlapPolicy::kAllow;
    Result<ClaimOutcome> out = (*coord)->Claim(req);
    if (!out.ok()) {
      ++report.errors;
    } else if (out->result == ClaimOutcome::Result::kClaimed) {
      ++report.claimed;
    } else if (out->result == ClaimOutcome::Result::kAlreadyClaimed) {
      ++report.already_claimed;
    } else {
      ++report.errors;
    }
  }
  coord->reset();
  _exit(WriteAll(report_fd, &report, sizeof(report)) ? 0 : 5);
}

TEST(SqliteMultiProcessTest, ProcessesRacingOnOneFileClaimEachFireOnce) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("gnomon-sqlite-mp-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/gnomon.db";
  testing::FakeClock clock;
  {
    // Create the schema first; no connection is open across fork().
    Result<std::unique_ptr<SqliteCoordinator>> c = SqliteCoordinator::Open(path, clock);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }

  int go_pipe[2];
  ASSERT_EQ(pipe(go_pipe), 0);
  std::vector<pid_t> pids;
  std::vector<int> report_fds;
  for (int i = 0; i < kChildren; ++i) {
    int report_pipe[2];
    ASSERT_EQ(pipe(report_pipe), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go_pipe[1]);
      close(report_pipe[0]);
      RunChild(path, i, go_pipe[0], report_pipe[1]);
    }
    close(report_pipe[1]);
    pids.push_back(pid);
    report_fds.push_back(report_pipe[0]);
  }
  close(go_pipe[0]);
  // Release all children at once (real concurrency between processes).
  const std::string go(kChildren, 'g');
  ASSERT_TRUE(WriteAll(go_pipe[1], go.data(), go.size()));
  close(go_pipe[1]);

  int total_claimed = 0;
  for (int i = 0; i < kChildren; ++i) {
    ChildReport report;
    const bool got = ReadAll(report_fds[i], &report, sizeof(report));
    close(report_fds[i]);
    int status = 0;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    ASSERT_TRUE(WIFEXITED(status)) << "child " << i << " status " << status;
    ASSERT_EQ(WEXITSTATUS(status), 0) << "child " << i;
    ASSERT_TRUE(got) << "child " << i;
    EXPECT_EQ(report.errors, 0) << "child " << i;
    EXPECT_EQ(report.claimed + report.already_claimed, kFires) << "child " << i;
    total_claimed += report.claimed;
  }
  EXPECT_EQ(total_claimed, kFires);

  Result<std::unique_ptr<SqliteCoordinator>> c = SqliteCoordinator::Open(path, clock);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Instant base = clock.Now() - std::chrono::hours(1);
  std::set<int64_t> tokens;
  for (int f = 0; f < kFires; ++f) {
    Result<std::vector<RunRecord>> runs = (*c)->GetRun(FireAt(base, f).RunId());
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    ASSERT_EQ(runs->size(), 1u) << "fire " << f;
    EXPECT_EQ((*runs)[0].outcome, RunOutcome::kRunning);
    tokens.insert((*runs)[0].fencing_token);
  }
  EXPECT_EQ(tokens.size(), static_cast<size_t>(kFires));
  EXPECT_EQ(*tokens.begin(), 1);
  EXPECT_EQ(*tokens.rbegin(), kFires);
  c->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gnomon

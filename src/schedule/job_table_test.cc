// JobTable's backlog lists: the jobs a housekeeping pass looks at, and the parked ones it leaves
// until the live set changes or other work joins their backlog (JobTable::ParkLocked).
#include "src/schedule/job_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/schedule/engine_context.h"
#include "src/schedule/scheduler_test_util.h"

namespace gnomon::internal {
namespace {

using scheduler_test::kBoot;
using scheduler_test::kStart;
using std::chrono::seconds;

class JobTableBacklogTest : public ::testing::Test {
 protected:
  JobTableBacklogTest() : ctx_(Options(), coord_, exec_, clock_), table_(ctx_) {
    for (const char* id : {"j1", "j2"}) {
      Result<CompiledJob> job = CompileJob(scheduler_test::Job(id, "*/10 * * * * *"));
      EXPECT_TRUE(job.ok()) << job.status().ToString();
      MutexLock lock(table_.mu());
      bool inserted = false;
      table_.InstallLocked(*job, inserted);
    }
    table_.SetLiveNodes({"a", "b"});
  }
  static SchedulerOptions Options() {
    SchedulerOptions opts;
    opts.node_id = "b";
    return opts;
  }
  bool Listed(const std::string& id) {
    MutexLock lock(table_.mu());
    return table_.BackloggedLocked().contains(id);
  }
  size_t Failed(const std::string& id) {
    MutexLock lock(table_.mu());
    const JobEntry* e = table_.FindLocked(id);
    return e != nullptr && e->backlog ? e->backlog->failed.size() : 0;
  }
  void KeepFailed(const std::string& id, int second) {
    MutexLock lock(table_.mu());
    table_.KeepFailedLocked(FireKey{id, kStart + seconds(second), 0, 1});
  }
  void Park(const std::string& id) {
    MutexLock lock(table_.mu());
    table_.ParkLocked(*table_.FindLocked(id));
  }

  testing::FakeClock clock_{kBoot};
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  EngineContext ctx_;
  JobTable table_;
};

TEST_F(JobTableBacklogTest, AParkedJobGathersFailedClaimsUnlisted) {
  KeepFailed("j1", 10);
  EXPECT_TRUE(Listed("j1"));
  Park("j1");
  EXPECT_FALSE(Listed("j1"));
  KeepFailed("j1", 20);
  EXPECT_FALSE(Listed("j1")) << "a failed claim unparked it";
  EXPECT_EQ(Failed("j1"), 2u);
  KeepFailed("j2", 10);
  EXPECT_TRUE(Listed("j2")) << "another job's backlog is listed as before";
}

TEST_F(JobTableBacklogTest, TheSameLiveSetInAnotherOrderKeepsItParked) {
  KeepFailed("j1", 10);
  Park("j1");
  table_.SetLiveNodes({"b", "a"});
  EXPECT_FALSE(Listed("j1"));
}

TEST_F(JobTableBacklogTest, AChangedLiveSetListsItAgain) {
  KeepFailed("j1", 10);
  Park("j1");
  table_.SetLiveNodes({"b"});
  EXPECT_TRUE(Listed("j1"));
  EXPECT_EQ(Failed("j1"), 1u);
  Park("j1");
  table_.SetLiveNodes({"b", "c"});
  EXPECT_TRUE(Listed("j1"));
}

TEST_F(JobTableBacklogTest, OtherWorkInItsBacklogListsItAgain) {
  KeepFailed("j1", 10);
  Park("j1");
  MutexLock lock(table_.mu());
  table_.WaitingLocked(*table_.FindLocked("j1")).unrecorded.insert(kStart + seconds(20));
  EXPECT_TRUE(table_.BackloggedLocked().contains("j1"));
}

TEST_F(JobTableBacklogTest, ARemovedParkedJobLeavesNoEntry) {
  KeepFailed("j1", 10);
  Park("j1");
  ASSERT_TRUE(table_.Remove("j1"));
  table_.SetLiveNodes({"b"});
  EXPECT_FALSE(Listed("j1"));
  MutexLock lock(table_.mu());
  EXPECT_TRUE(table_.BackloggedLocked().empty());
}

}  // namespace
}  // namespace gnomon::internal

// Jobs that fire jobs (docs/semantics.md "Dependencies"): on_success, on_failure and on_complete
// on two nodes sharing a backend, on a FakeClock.
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "src/schedule/scheduler_test_util.h"

namespace gnomon::scheduler_test {
namespace {

using json = nlohmann::json;

inline DependencySpec& Children(JobSpec& j) {
  return j.dependencies ? *j.dependencies : j.dependencies.emplace();
}

// The attempts the executor ran of `job`.
std::vector<RecordedAttempt> AttemptsOf(const RecordingExecutor& exec, const std::string& job) {
  std::vector<RecordedAttempt> out;
  for (const RecordedAttempt& a : exec.attempts()) {
    if (a.job_id == job) out.push_back(a);
  }
  return out;
}

class DependenciesTest : public SchedulerTest {
 protected:
  // Two nodes with the same jobs, started.
  void StartTwo(const std::vector<JobSpec>& jobs) {
    for (Node* n : {&a_, &b_}) {
      for (const JobSpec& j : jobs) {
        Result<CompiledJob> c = CompileJob(j);
        ASSERT_TRUE(c.ok()) << c.status().ToString();
        ASSERT_TRUE(n->scheduler->AddJob(*c).ok());
      }
    }
    ASSERT_TRUE(a_.scheduler->Start().ok());
    ASSERT_TRUE(b_.scheduler->Start().ok());
  }
  void StopAll() {
    a_.scheduler->Stop();
    b_.scheduler->Stop();
  }
  Node a_{"a", coord_, exec_, clock_};
  Node b_{"b", coord_, exec_, clock_};
};

TEST_F(DependenciesTest, AChildRunsOnceAtTheParentsInstantWithItsParamsAndCause) {
  JobSpec parent = Job("extract", "0 * * * * *");
  parent.params = R"({"day":"2026-03-01"})";
  Children(parent).on_success = {"load"};
  Children(parent).on_failure = {"alert"};
  JobSpec load = Job("load", "");  // no schedule: it runs as a child only
  load.params = R"({"mode":"full"})";
  StartTwo({parent, load, Job("alert", "")});
  EXPECT_FALSE(a_.scheduler->GetJob("load")->next_fire.has_value());

  const Instant fire = kStart + minutes(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(exec_.AwaitFinished(2)) << "the parent, then its child";
  StopAll();
  const std::vector<RecordedAttempt> loads = AttemptsOf(exec_, "load");
  ASSERT_EQ(loads.size(), 1u) << "claimed once though both nodes know the job";
  EXPECT_EQ(loads[0].run_id, FireKey({"load", fire, 0, 1}).RunId());
  EXPECT_EQ(loads[0].scheduled_at, fire);
  EXPECT_EQ(json::parse(loads[0].params), json::parse(R"({"mode":"full","day":"2026-03-01"})"))
      << "the parent's parameters over the child's own";
  EXPECT_TRUE(AttemptsOf(exec_, "alert").empty()) << "on_failure: the parent succeeded";
  const std::vector<RunRecord> history = History(coord_, "load");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].cause, "after " + FireKey({"extract", fire, 0, 1}).RunId() + " succeeded");
  EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded);
}

TEST_F(DependenciesTest, AFailureAfterItsRetriesFiresOnFailureAndOnCompleteOnce) {
  JobSpec parent = Job("settle", "0 * * * * *");
  parent.retries = 1;
  parent.retry_backoff = seconds(1);
  Children(parent).on_success = {"report"};
  Children(parent).on_failure = {"page"};
  Children(parent).on_complete = {"page", "cleanup"};
  exec_.SetBehavior([](const JobSpec& j, const RunContext&) {
    ExecResult r;
    if (j.id == "settle") r.outcome = RunOutcome::kFailed;
    return r;
  });
  StartTwo({parent, Job("report", ""), Job("page", ""), Job("cleanup", "")});
  const Instant fire = kStart + minutes(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(exec_.AwaitFinished(1));
  EXPECT_TRUE(AttemptsOf(exec_, "page").empty()) << "not after the first attempt: a retry follows";
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return exec_.AwaitFinished(4, t); }, milliseconds(500),
      seconds(10)));
  StopAll();
  EXPECT_EQ(AttemptsOf(exec_, "settle").size(), 2u);
  EXPECT_EQ(AttemptsOf(exec_, "page").size(), 1u) << "named twice, fired once";
  EXPECT_EQ(AttemptsOf(exec_, "cleanup").size(), 1u);
  EXPECT_TRUE(AttemptsOf(exec_, "report").empty());
  EXPECT_EQ(History(coord_, "page").at(0).cause,
            "after " + FireKey({"settle", fire, 0, 1}).RunId() + " failed");
}

TEST_F(DependenciesTest, AChildWithItsOwnScheduleRunsOnceForAnInstantBothName) {
  JobSpec parent = Job("every-minute", "0 * * * * *");
  Children(parent).on_complete = {"also-every-minute"};
  JobSpec child = Job("also-every-minute", "0 * * * * *");
  // Its own timer and the parent's end go for the same fire key: whichever claims first runs it.
  StartTwo({parent, child});
  const Instant fire = kStart + minutes(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(exec_.AwaitFinished(2));
  EXPECT_FALSE(exec_.AwaitFinished(3, milliseconds(300)));
  StopAll();
  const std::vector<RecordedAttempt> runs = AttemptsOf(exec_, "also-every-minute");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, FireKey({"also-every-minute", fire, 0, 1}).RunId());
}

TEST_F(DependenciesTest, AChainCarriesTheFirstInstantThrough) {
  JobSpec a = Job("a", "0 * * * * *");
  Children(a).on_success = {"b"};
  JobSpec b = Job("b", "");
  Children(b).on_success = {"c"};
  StartTwo({a, b, Job("c", "")});
  const Instant fire = kStart + minutes(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(exec_.AwaitFinished(3));
  StopAll();
  const std::vector<RecordedAttempt> c = AttemptsOf(exec_, "c");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].run_id, FireKey({"c", fire, 0, 1}).RunId());
  EXPECT_EQ(History(coord_, "c").at(0).cause,
            "after " + FireKey({"b", fire, 0, 1}).RunId() + " succeeded");
}

// A parent fire that `node` claimed and reported with `outcome`, ended at `finished`, as though
// the node then died before firing its children.
void ReportedElsewhere(Coordinator& coord, const FireKey& fire, RunOutcome outcome,
                       Instant finished) {
  ClaimRequest req;
  req.fire = fire;
  req.node_id = "gone";
  Result<ClaimOutcome> won = coord.Claim(req);
  ASSERT_TRUE(won.ok() && won->claim) << "claim of " << fire.RunId();
  RunRecord rec;
  rec.run_id = fire.RunId();
  rec.job_id = fire.job_id;
  rec.scheduled_at = fire.scheduled_at;
  rec.attempt = won->claim->attempt;
  rec.fencing_token = won->claim->fencing_token;
  rec.node_id = "gone";
  rec.started_at = fire.scheduled_at;
  rec.finished_at = finished;
  rec.outcome = outcome;
  ASSERT_TRUE(coord.Report(*won->claim, rec, true).ok());
}

TEST_F(DependenciesTest, TheSweepFiresTheChildOfAParentWhoseNodeDiedAfterItsReport) {
  JobSpec parent = Job("extract", "0 0 * * * *");
  Children(parent).on_success = {"load"};
  // Two hourly fires another node ran and reported: one that ended within the sweep's window
  // (before this node started: a restart), one that ended long before it.
  const FireKey recent{"extract", kStart, 0, 1};
  const FireKey old{"extract", kStart - std::chrono::hours(1), 0, 1};
  ReportedElsewhere(coord_, old, RunOutcome::kSucceeded, old.scheduled_at + seconds(1));
  ReportedElsewhere(coord_, recent, RunOutcome::kSucceeded, clock_.Now());
  clock_.Advance(minutes(2));
  Node n("n", coord_, exec_, clock_);
  for (const JobSpec& j : {parent, Job("load", "")}) ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return exec_.AwaitFinished(1, t); }, seconds(1), seconds(30)))
      << "a housekeeping pass fires the missing child";
  // More passes fire nothing more: the child's fire has its record now.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(5));
    EXPECT_FALSE(exec_.AwaitFinished(2, milliseconds(100)));
  }
  n.scheduler->Stop();
  const std::vector<RecordedAttempt> loads = AttemptsOf(exec_, "load");
  ASSERT_EQ(loads.size(), 1u) << "the old parent run is out of the sweep's window";
  EXPECT_EQ(loads[0].run_id, FireKey({"load", kStart, 0, 1}).RunId());
}

TEST_F(DependenciesTest, AJoinOfTwoParentsEndingAtOnceOnTwoNodesRunsOnce) {
  // Both parents hold their runs until both run, then end together (on one node or two), each
  // reading the other's fire around the same moment.
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  exec_.SetBehavior([&](const JobSpec& j, const RunContext&) {
    if (j.id == "a" || j.id == "b") {
      std::unique_lock<std::mutex> lock(mu);
      ++started;
      cv.notify_all();
      cv.wait_for(lock, seconds(10), [&] { return started >= 2; });
    }
    return ExecResult{};
  });
  JobSpec join = Job("publish", "");
  Children(join).after = {"a", "b"};
  StartTwo({Job("a", "0 * * * * *"), Job("b", "0 * * * * *"), join});
  const Instant fire = kStart + minutes(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return exec_.AwaitFinished(3, t); }, seconds(1), seconds(30)))
      << "the join runs, from a parent's end or from a sweep";
  for (int i = 0; i < 3; ++i) {  // more passes: no second run
    clock_.Advance(seconds(5));
    EXPECT_FALSE(exec_.AwaitFinished(4, milliseconds(100)));
  }
  StopAll();
  const std::vector<RecordedAttempt> runs = AttemptsOf(exec_, "publish");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, FireKey({"publish", fire, 0, 1}).RunId());
  EXPECT_EQ(History(coord_, "publish").at(0).cause, "joined a, b at " + fire.ToRfc3339());
}

TEST_F(DependenciesTest, AJoinWhoseParentFailedIsSkippedAfterItsTimeoutNamingIt) {
  exec_.SetBehavior([](const JobSpec& j, const RunContext&) {
    ExecResult r;
    if (j.id == "b") r.outcome = RunOutcome::kFailed;
    return r;
  });
  JobSpec join = Job("publish", "");
  Children(join).after = {"a", "b"};
  Children(join).join_timeout = seconds(30);
  StartTwo({Job("a", "0 0 * * * *"), Job("b", "0 0 * * * *"), join});
  const Instant fire = kStart + std::chrono::hours(1);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(exec_.AwaitFinished(2));
  auto skipped = [&](milliseconds t) {
    return a_.observer.Await(Kind::kSkipped, 1, {}, t) ||
           b_.observer.Await(Kind::kSkipped, 1, {}, milliseconds(0));
  };
  // Within the timeout: no record yet (b could still be re-run and succeed).
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(seconds(5));
    EXPECT_FALSE(skipped(milliseconds(100)));
  }
  ASSERT_TRUE(AdvanceUntil(clock_, skipped, seconds(5), seconds(60)));
  StopAll();
  EXPECT_TRUE(AttemptsOf(exec_, "publish").empty());
  const std::vector<RunRecord> history = History(coord_, "publish");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].run_id, FireKey({"publish", fire, 0, 1}).RunId());
  EXPECT_EQ(history[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(history[0].skip_reason, "join_timeout: b did not succeed");
}

}  // namespace
}  // namespace gnomon::scheduler_test

// Engine policies, driven by FakeClock (no real sleeps): the engine's loop and watchdog wait on
// the fake clock, so a test advances time and then waits for the *events* the engine records.
#include "gnomon/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/forwarding_coordinator.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/schedule/rendezvous.h"

namespace gnomon {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeClock;
using testing::MemoryCoordinator;
using testing::RecordedAttempt;
using testing::RecordingExecutor;
using testing::RecordingObserver;
using Kind = SchedulerEvent::Kind;

// 2026-03-01T00:00:00Z, a whole minute. Tests start their clocks 5 s later (kBoot), so the fire
// at kStart is in the past beyond claim_grace and nothing fires at start.
const Instant kStart = Instant::FromUnixSeconds(1772323200);
const Instant kBoot = kStart + std::chrono::seconds(5);

// Moves `clock` forward to `t`.
void AdvanceTo(testing::FakeClock& clock, Instant t) { clock.Advance(t - clock.Now()); }

JobSpec Job(const std::string& id, const std::string& schedule) {
  JobSpec j;
  j.id = id;
  j.schedule = schedule;
  j.in_process = true;
  return j;
}

std::vector<RunRecord> History(Coordinator& c, const std::string& job) {
  RunQuery q;
  q.job_id = job;
  q.limit = 1000;
  Result<RunPage> page = c.ListRuns(q);
  GNOMON_CHECK(page.ok());
  std::vector<RunRecord> runs = page->runs;
  std::reverse(runs.begin(), runs.end());  // oldest first
  return runs;
}

// One node: a scheduler with its observer, on a shared coordinator and executor.
struct Node {
  Node(const std::string& id, Coordinator& coord, Executor& exec, Clock& clock,
       SchedulerOptions extra = {}) {
    extra.node_id = id;
    extra.observer = &observer;
    // Stop() waits shutdown_grace on the fake clock; only the test of graceful stop sets one, so a
    // failing test cannot hang in its teardown.
    if (extra.shutdown_grace == SchedulerOptions{}.shutdown_grace)
      extra.shutdown_grace = Duration(0);
    extra.random_seed = 7;
    extra.worker_threads = 4;
    scheduler = std::make_unique<Scheduler>(extra, coord, exec, clock);
  }
  RecordingObserver observer;
  std::unique_ptr<Scheduler> scheduler;
};

// Advances `clock` in `step`s (at most `limit` of fake time) until `await(real_timeout)` holds;
// `await` waits up to its argument in real time for the engine to react to the last step.
bool AdvanceUntil(FakeClock& clock, const std::function<bool(milliseconds)>& await, Duration step,
                  Duration limit) {
  for (Duration passed{0}; passed < limit; passed += step) {
    if (await(milliseconds(50))) return true;
    clock.Advance(step);
  }
  return await(seconds(10));
}

// Every node answers every fire with a claim or a lost claim.
bool AwaitAnswered(RecordingObserver& obs, int fires) {
  for (int i = 0; i < 40; ++i) {
    if (obs.Count(Kind::kClaimed) + obs.Count(Kind::kClaimLost) >= fires) return true;
    obs.Await(Kind::kClaimLost, fires, {}, milliseconds(50));
  }
  return false;
}

// Housekeeping runs every 5 s of fake time; advance until a lost run was resolved.
bool AdvanceUntilLost(FakeClock& clock, RecordingObserver& obs) {
  for (int i = 0; i < 10; ++i) {
    if (obs.Await(Kind::kLostRun, 1, {}, milliseconds(200))) return true;
    clock.Advance(seconds(5));
  }
  return false;
}

class SchedulerTest : public ::testing::Test {
 protected:
  FakeClock clock_{kBoot};
  MemoryCoordinator coord_{clock_};
  RecordingExecutor exec_;
};

TEST_F(SchedulerTest, FiresEachInstantOnceWithContext) {
  Node n("node-a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->AddJob(Job("tick", "*/10 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  for (int i = 1; i <= 5; ++i) {
    AdvanceTo(clock_, kStart + seconds(10 * i));
    // Recorded before the next fire, or overlap = forbid would rightly skip it.
    ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, i)) << "fire " << i;
  }
  n.scheduler->Stop();
  const auto attempts = exec_.attempts();
  ASSERT_EQ(attempts.size(), 5u);
  std::set<int64_t> tokens;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const Instant expected = kStart + seconds(10 * (i + 1));
    EXPECT_EQ(attempts[i].scheduled_at, expected);
    EXPECT_EQ(attempts[i].run_id, "tick@" + std::to_string(expected.unix_millis()));
    EXPECT_EQ(attempts[i].attempt, 1);
    EXPECT_EQ(attempts[i].node_id, "node-a");
    EXPECT_EQ(attempts[i].traceparent.size(), 55u);
    if (i > 0) {
      EXPECT_GT(attempts[i].fencing_token, attempts[i - 1].fencing_token);
    }
  }
  const auto history = History(coord_, "tick");
  ASSERT_EQ(history.size(), 5u);
  for (const RunRecord& r : history) EXPECT_EQ(r.outcome, RunOutcome::kSucceeded);
}

TEST_F(SchedulerTest, ThreeNodesRunEachFireOnce) {
  Node a("a", coord_, exec_, clock_), b("b", coord_, exec_, clock_), c("c", coord_, exec_, clock_);
  JobSpec j = Job("settle", "* * * * * *");
  j.overlap = OverlapPolicy::kAllow;  // a run may still be reporting when the next second fires
  for (Node* n : {&a, &b, &c}) {
    ASSERT_TRUE(n->scheduler->AddJob(j).ok());
    ASSERT_TRUE(n->scheduler->Start().ok());
  }
  // Fires at kBoot - 1 s and kBoot are within claim_grace at start; then one a second.
  ASSERT_TRUE(exec_.AwaitFinished(2));
  for (int i = 1; i <= 20; ++i) {
    clock_.Advance(seconds(1));
    ASSERT_TRUE(exec_.AwaitFinished(2 + i));
  }
  // Give every node the chance to try every fire before stopping (a node that fell behind
  // handles late fires as misfires, which answer differently, so this is best effort).
  for (Node* n : {&a, &b, &c}) AwaitAnswered(n->observer, 22);
  a.scheduler->Stop();
  b.scheduler->Stop();
  c.scheduler->Stop();
  std::map<int64_t, int> per_second;
  for (const auto& at : exec_.attempts()) ++per_second[at.scheduled_at.unix_seconds()];
  ASSERT_EQ(per_second.size(), 22u);
  for (const auto& [second, count] : per_second) EXPECT_EQ(count, 1) << second;
  EXPECT_EQ(per_second.begin()->first, kBoot.unix_seconds() - 1);
  EXPECT_EQ(per_second.rbegin()->first, kBoot.unix_seconds() + 20) << "no fire missed";
  EXPECT_EQ(a.observer.Count(Kind::kClaimed) + b.observer.Count(Kind::kClaimed) +
                c.observer.Count(Kind::kClaimed),
            22);
}

// Waits (real time, bounded) until every node's live set has `n` nodes.
bool AwaitLiveSets(const std::vector<Node*>& nodes, size_t n) {
  for (int i = 0; i < 400; ++i) {
    bool all = true;
    for (Node* node : nodes) all = all && node->scheduler->LiveNodes().size() == n;
    if (all) return true;
    std::mutex mu;
    std::condition_variable cv;
    std::unique_lock<std::mutex> lock(mu);
    SystemClock::Get().WaitFor(lock, cv, milliseconds(25), [] { return false; });
  }
  return false;
}

// Sharded ownership: with agreed live sets, each fire is claimed once, by its rendezvous owner;
// a stopped owner's fires are taken over by the next-ranked node after takeover_delay.
TEST_F(SchedulerTest, ShardedOwnershipClaimsOncePerFireAndTakesOver) {
  SchedulerOptions o;
  o.takeover_delay = milliseconds(500);
  o.housekeeping_interval = seconds(3);  // heartbeats live 9 s
  Node a("a", coord_, exec_, clock_, o), b("b", coord_, exec_, clock_, o),
      c("c", coord_, exec_, clock_, o);
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) ids.push_back("own-" + std::to_string(i));
  for (Node* n : {&a, &b, &c}) {
    for (const std::string& id : ids) {
      ASSERT_TRUE(n->scheduler->AddJob(Job(id, "*/10 * * * * *")).ok());
    }
    ASSERT_TRUE(n->scheduler->Start().ok());
  }
  // Time moves in 500 ms steps, so every node's housekeeping (every 3 s) keeps its heartbeat
  // live and re-reads the others' before any of them expires.
  // Heartbeats are liveness on the clock: a node whose housekeeping has not run for 9 s of fake
  // time is rightly taken for dead. So time moves in 500 ms steps, and after each one the test
  // waits (bounded, real time) until every running node's heartbeat is from its latest pass.
  std::set<std::string> running = {"a", "b", "c"};
  auto settle = [&] {
    for (int i = 0; i < 400; ++i) {
      int fresh = 0;
      const Result<std::vector<NodeInfo>> nodes = coord_.ListNodes();
      for (const NodeInfo& n : *nodes) {
        fresh += running.count(n.node_id) && n.last_heartbeat >= clock_.Now() - milliseconds(3500);
      }
      if (fresh == static_cast<int>(running.size())) return;
      std::mutex mu;
      std::condition_variable cv;
      std::unique_lock<std::mutex> lock(mu);
      SystemClock::Get().WaitFor(lock, cv, milliseconds(5), [] { return false; });
    }
  };
  auto step_to = [&](Instant t) {
    while (clock_.Now() < t) {
      clock_.Advance(std::min<Duration>(milliseconds(500), t - clock_.Now()));
      settle();
    }
  };
  step_to(kStart + seconds(9));
  ASSERT_TRUE(AwaitLiveSets({&a, &b, &c}, 3));
  const std::vector<std::string> all = {"a", "b", "c"};
  auto claims = [&] {
    int n = 0;
    for (Node* node : {&a, &b, &c}) {
      n += node->observer.Count(Kind::kClaimed) + node->observer.Count(Kind::kClaimLost);
    }
    return n;
  };
  // Three rounds; each time the backups check after 500 ms and 1 s and find the owner's claim.
  for (int round = 1; round <= 3; ++round) {
    step_to(kStart + seconds(10 * round));
    ASSERT_TRUE(exec_.AwaitFinished(12 * round)) << "round " << round;
  }
  step_to(kStart + seconds(32));
  ASSERT_TRUE(exec_.AwaitFinished(36));
  for (const RecordedAttempt& at : exec_.attempts()) {
    EXPECT_EQ(at.node_id, internal::RendezvousOwner(all, at.job_id, 0)) << at.run_id;
  }
  EXPECT_EQ(claims(), 36) << "one claim per fire in steady state";

  // c stops (at +38 s); its heartbeat is still live (past +44 s), so a and b keep ranking it
  // first for its jobs: they take its fires over after 500 ms (rank 1) and run each once.
  step_to(kStart + seconds(38));
  c.scheduler->Stop();
  running.erase("c");
  int owned_by_c = 0;
  for (const std::string& id : ids) owned_by_c += internal::RendezvousOwner(all, id, 0) == "c";
  ASSERT_GT(owned_by_c, 0);
  step_to(kStart + seconds(40));
  for (int i = 0; i < 4 && exec_.attempts().size() < 48u; ++i) {
    exec_.AwaitFinished(48, milliseconds(300));
    clock_.Advance(milliseconds(500));
    settle();
  }
  ASSERT_TRUE(exec_.AwaitFinished(48));
  a.scheduler->Stop();
  b.scheduler->Stop();
  std::map<std::string, int> per_fire;
  for (const RecordedAttempt& at : exec_.attempts()) ++per_fire[at.run_id];
  ASSERT_EQ(per_fire.size(), 48u);
  for (const auto& [run, count] : per_fire) EXPECT_EQ(count, 1) << run;
  for (const std::string& id : ids) {
    const RunRecord last = History(coord_, id).back();
    ASSERT_EQ(last.scheduled_at, kStart + seconds(40));
    if (internal::RendezvousOwner(all, id, 0) != "c") continue;
    const std::string next = internal::RendezvousOwner({"a", "b"}, id, 0);
    EXPECT_EQ(last.node_id, next) << id << " taken over by the rank-1 node";
    EXPECT_GE(last.started_at - last.scheduled_at, milliseconds(500)) << id;
  }
}

TEST_F(SchedulerTest, EarlyFireGuardUsesTheBackendClock) {
  FakeClock backend_clock(kBoot);  // in step with the node when it starts: measured skew 0
  MemoryCoordinator coord(backend_clock);
  SchedulerOptions opts;
  opts.housekeeping_interval = minutes(10);  // no new skew measurement during the test
  Node n("fast", coord, exec_, clock_, opts);
  ASSERT_TRUE(n.scheduler->AddJob(Job("guarded", "0 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  // Wait for the first housekeeping pass (its heartbeat), which measures the skew too.
  for (int i = 0; i < 250 && coord.ListNodes()->empty(); ++i) {
    n.observer.Await(Kind::kError, 1, {}, milliseconds(20));  // a bounded real wait
  }
  ASSERT_FALSE(coord.ListNodes()->empty());
  // Then the backend's clock steps 2 s back: the node's estimate is 2 s fast until it measures
  // again, and the backend's early-fire guard is what stops an early run.
  backend_clock.SetWall(backend_clock.Now() - seconds(2));
  // The backend first: the node's claim must see the backend at +58 s, not before it moved.
  AdvanceTo(backend_clock, kStart + seconds(58));
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "early-guard"));
  EXPECT_EQ(exec_.started(), 0) << "ran before the backend reached the instant";
  // The retry comes when the backend is within skew_tolerance (500 ms) of the instant.
  ASSERT_TRUE(AdvanceUntil(
      clock_,
      [&](milliseconds wait) {
        if (exec_.AwaitStarted(1, wait)) return true;
        backend_clock.Advance(milliseconds(250));
        return false;
      },
      milliseconds(250), seconds(5)));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  EXPECT_GE(backend_clock.Now(), kStart + seconds(60) - milliseconds(500));
  n.scheduler->Stop();
}

// A node whose clock is 30 s fast or slow fires on the backend's clock: on time, never early,
// and a fast node joining does not take the next fires for missed ones (chaos F9).
TEST(SchedulerSkewTest, FiresOnTheBackendClockWhateverTheNodeClock) {
  for (int skew_s : {30, -30}) {
    FakeClock backend(kBoot);
    FakeClock node_clock(kBoot + seconds(skew_s));
    MemoryCoordinator coord(backend);
    RecordingExecutor exec;
    // The cluster ran the job before: the joining node's catch-up pass looks for missed fires.
    ASSERT_TRUE(coord.RecordSkipped(FireKey{"skewed", kStart, 0, 1}, "earlier", "misfire").ok());
    Node n("n", coord, exec, node_clock);
    ASSERT_TRUE(n.scheduler->AddJob(Job("skewed", "*/10 * * * * *")).ok());
    ASSERT_TRUE(n.scheduler->Start().ok());
    for (int i = 1; i <= 3; ++i) {
      const Instant at = kStart + seconds(10 * i);
      AdvanceTo(backend, at);
      AdvanceTo(node_clock, at + seconds(skew_s));
      ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, i)) << "skew " << skew_s << " fire " << i;
    }
    n.scheduler->Stop();
    const auto attempts = exec.attempts();
    ASSERT_EQ(attempts.size(), 3u) << "skew " << skew_s;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(attempts[i].scheduled_at, kStart + seconds(10 * (i + 1)));
    EXPECT_EQ(n.observer.Count(Kind::kSkipped, "misfire"), 0) << "skew " << skew_s;
    EXPECT_EQ(n.observer.Count(Kind::kSkipped, "early-guard"), 0) << "skew " << skew_s;
  }
}

TEST_F(SchedulerTest, OverlapForbidSkipsAndRecords) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  Node n("a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->AddJob(Job("long", "*/10 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  AdvanceTo(clock_, kStart + seconds(20));
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "overlap"));
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(1));
  n.scheduler->Stop();
  const auto history = History(coord_, "long");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(history[1].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(history[1].skip_reason, "overlap");
}

// Admission (namespace quotas): asked with the claim held; a refusal is recorded as skipped with
// its reason and the lease released, and the next fire is asked again.
TEST_F(SchedulerTest, AdmissionRefusalIsRecordedAsSkipped) {
  SchedulerOptions o;
  std::atomic<int> asked{0};
  std::atomic<bool> refuse{true};
  o.admit = [&](const JobSpec& job, const Claim& claim) -> std::string {
    ++asked;
    EXPECT_EQ(job.id, "q.job");
    EXPECT_EQ(claim.attempt, 1);
    // The claim is held while admission is asked: its record is running in the backend.
    Result<std::vector<RunRecord>> run = coord_.GetRun(claim.fire.RunId());
    EXPECT_TRUE(run.ok() && run->back().outcome == RunOutcome::kRunning);
    return refuse ? "quota: namespace q. has 1 run running (max_concurrent_runs = 1)" : "";
  };
  Node n("a", coord_, exec_, clock_, o);
  ASSERT_TRUE(n.scheduler->AddJob(Job("q.job", "*/10 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "quota"));
  refuse = false;
  AdvanceTo(clock_, kStart + seconds(20));
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 1));
  n.scheduler->Stop();
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(exec_.attempts().size(), 1u);
  const auto history = History(coord_, "q.job");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(history[0].skip_reason,
            "quota: namespace q. has 1 run running (max_concurrent_runs = 1)");
  EXPECT_EQ(history[1].outcome, RunOutcome::kSucceeded);
  // The refused fire's lease was released: nothing is left to expire.
  EXPECT_TRUE(coord_.ListExpired(10)->empty());
  clock_.Advance(minutes(5));
  EXPECT_TRUE(coord_.ListExpired(10)->empty());
}

TEST_F(SchedulerTest, OverlapReplaceCancelsTheRunningOne) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("replace", "*/10 * * * * *");
  j.overlap = OverlapPolicy::kReplace;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  AdvanceTo(clock_, kStart + seconds(20));
  ASSERT_TRUE(exec_.AwaitFinished(1));  // the first one, cancelled
  ASSERT_TRUE(exec_.AwaitStarted(2));
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(2));
  n.scheduler->Stop();
  const auto history = History(coord_, "replace");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kCancelled);
  EXPECT_NE(history[0].error.find("replaced"), std::string::npos) << history[0].error;
  EXPECT_EQ(history[1].outcome, RunOutcome::kSucceeded);
}

// An operator's cancel (CancelFire, from any node's API) reaches the holder through the state
// poll: its run is stopped within one poll interval, long before the next renewal, and the
// cancelled fire is not retried.
TEST_F(SchedulerTest, ACancelInTheBackendStopsTheRunWithinAStatePoll) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("cancelled", "0 * * * * *");
  j.retries = 3;
  j.retry_backoff = seconds(1);
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  const FireKey fire{"cancelled", kStart + seconds(60)};
  ASSERT_TRUE(coord_.CancelFire(fire, "cancelled by ops").ok());
  // One state poll (500 ms of fake time), far below the renewal period (10 s).
  clock_.Advance(milliseconds(500));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  EXPECT_TRUE(exec_.attempts()[0].stopped);
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 1));
  // No retry follows, however long we wait.
  clock_.Advance(seconds(30));
  n.scheduler->Stop();
  EXPECT_EQ(exec_.attempts().size(), 1u);
  const auto history = History(coord_, "cancelled");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kCancelled);
  EXPECT_EQ(history[0].error, "cancelled by ops");
}

// Backfill: the window's fires without a record run, oldest first, at most max_concurrent at a
// time, marked as a backfill; a second backfill finds them recorded; bad windows are refused.
TEST_F(SchedulerTest, BackfillRunsTheUnrecordedFiresOfAWindow) {
  std::mutex mu;
  std::condition_variable cv;
  int live = 0, most = 0;
  exec_.SetBehavior([&](const JobSpec&, const RunContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mu);
      most = std::max(most, ++live);
    }
    cv.notify_all();
    exec_.WaitForStopOrRelease(ctx);
    std::lock_guard<std::mutex> lock(mu);
    --live;
    return ExecResult{};
  });
  AdvanceTo(clock_, kStart + minutes(10) + seconds(30));  // between two fires
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("bf", "0 * * * * *");  // forbid: the backfill's fires still overlap each other
  // The fires missed since the newest record (the one below) are the start's catch-up's: with
  // misfire = skip it records them (after the window) and runs none.
  j.misfire = MisfirePolicy::kSkip;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  const FireKey skipped{"bf", kStart + minutes(4)};
  ASSERT_TRUE(coord_.RecordSkipped(skipped, "elsewhere", "misfire").ok());

  Result<BackfillPlan> too_many =
      n.scheduler->Backfill("bf", kStart, kStart + minutes(5), 2, 3, "x");
  EXPECT_NE(too_many.status().message().find("the window holds 5 fires, more than the 3"),
            std::string::npos)
      << too_many.status().ToString();
  EXPECT_EQ(n.scheduler->Backfill("bf", kStart, kStart + minutes(11), 2, 100, "x").status().code(),
            StatusCode::kInvalidArgument);  // ends in the future
  EXPECT_EQ(n.scheduler->Backfill("bf", kStart, kStart, 2, 100, "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(n.scheduler->Backfill("bf", kStart, kStart + minutes(5), 0, 100, "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(n.scheduler->Backfill("nope", kStart, kStart + minutes(5), 1, 100, "x").status().code(),
            StatusCode::kNotFound);

  Result<BackfillPlan> plan =
      n.scheduler->Backfill("bf", kStart, kStart + minutes(5), 2, 100, "backfill by ops");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->fires, 5);
  EXPECT_EQ(plan->recorded, 1);
  ASSERT_EQ(plan->run_ids.size(), 4u);
  EXPECT_EQ(plan->run_ids.front(), (FireKey{"bf", kStart}.RunId()));  // oldest first
  {
    // Both lanes' attempts are inside the behaviour (started() counts them a step earlier).
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return live == 2; }));
  }
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(4));
  EXPECT_EQ(most, 2);
  // Each unrecorded fire ran once.
  EXPECT_EQ(exec_.attempts().size(), 4u);
  std::set<std::string> ran;
  for (const auto& a : exec_.attempts()) ran.insert(a.run_id);
  EXPECT_EQ(ran, std::set<std::string>(plan->run_ids.begin(), plan->run_ids.end()));
  // Sent again: everything is recorded, nothing runs.
  Result<BackfillPlan> again =
      n.scheduler->Backfill("bf", kStart, kStart + minutes(5), 2, 100, "backfill by ops");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->recorded, 5);
  EXPECT_TRUE(again->run_ids.empty());
  n.scheduler->Stop();
  EXPECT_EQ(exec_.attempts().size(), 4u);
  std::map<std::string, RunRecord> records;
  for (const RunRecord& r : History(coord_, "bf")) records[r.run_id] = r;
  EXPECT_EQ(records.at(skipped.RunId()).outcome, RunOutcome::kSkipped);
  for (const std::string& id : plan->run_ids) {
    EXPECT_EQ(records.at(id).outcome, RunOutcome::kSucceeded) << id;
    EXPECT_EQ(records.at(id).cause, "backfill by ops") << id;
  }
}

TEST_F(SchedulerTest, TimeoutCancelsTheRun) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{RunOutcome::kCancelled, {}, "", "partial output"};
  });
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("slow", "0 * * * * *");
  j.timeout = seconds(5);
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  EXPECT_EQ(exec_.attempts().size(), 0u);
  clock_.Advance(seconds(5));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  n.scheduler->Stop();
  const auto history = History(coord_, "slow");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kTimedOut);
  EXPECT_EQ(history[0].output, "partial output");
  EXPECT_EQ(exec_.attempts()[0].deadline, kStart + seconds(65));
}

TEST_F(SchedulerTest, RetriesWithBackoffAndNewTokens) {
  exec_.SetBehavior([](const JobSpec&, const RunContext&) {
    return ExecResult{RunOutcome::kFailed, 1, "exit 1", ""};
  });
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("flaky", "0 * * * * *");
  j.retries = 2;
  j.retry_backoff = seconds(10);
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  // Backoff is at most 10 s, then at most 20 s (full jitter).
  ASSERT_TRUE(n.observer.Await(Kind::kRetryScheduled, 1));
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds w) { return exec_.AwaitFinished(2, w); }, seconds(1), seconds(11)));
  ASSERT_TRUE(n.observer.Await(Kind::kRetryScheduled, 2));
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds w) { return exec_.AwaitFinished(3, w); }, seconds(1), seconds(21)));
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 3));
  n.scheduler->Stop();
  const auto attempts = exec_.attempts();
  ASSERT_EQ(attempts.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(attempts[i].attempt, i + 1);
    EXPECT_EQ(attempts[i].run_id, attempts[0].run_id);
  }
  EXPECT_LT(attempts[0].fencing_token, attempts[1].fencing_token);
  EXPECT_LT(attempts[1].fencing_token, attempts[2].fencing_token);
  for (const auto& e : n.observer.events()) {
    if (e.kind == Kind::kRetryScheduled) {
      EXPECT_LE(e.duration, seconds(10) * (1 << (e.attempt - 2)));
      EXPECT_GE(e.duration, Duration(0));
    }
  }
  const auto history = History(coord_, "flaky");
  ASSERT_EQ(history.size(), 3u);
  Result<JobState> st = coord_.GetJobState("flaky");
  EXPECT_EQ(st->consecutive_failures, 1) << "one fire failed (its attempts count once)";
}

// A retry's backoff is a timer, not a worker waiting on the clock: with one worker, a job whose
// attempt failed with a long backoff does not hold back another job's fires meanwhile, and its
// retry still runs when the backoff is over.
TEST_F(SchedulerTest, ARetryBackoffHoldsNoWorker) {
  exec_.SetBehavior([](const JobSpec& job, const RunContext&) {
    return job.id == "flaky" ? ExecResult{RunOutcome::kFailed, 1, "exit 1", ""}
                             : ExecResult{RunOutcome::kSucceeded, 0, "", ""};
  });
  SchedulerOptions opts;
  opts.node_id = "a";
  opts.worker_threads = 1;
  opts.shutdown_grace = Duration(0);
  opts.random_seed = 7;
  RecordingObserver observer;
  opts.observer = &observer;
  Scheduler scheduler(opts, coord_, exec_, clock_);
  JobSpec flaky = Job("flaky", "0 0 * * * *");
  flaky.retries = 1;
  flaky.retry_backoff = seconds(30);
  ASSERT_TRUE(scheduler.AddJob(flaky).ok());
  ASSERT_TRUE(scheduler.Start().ok());
  const Instant fire = kStart + minutes(60);
  AdvanceTo(clock_, fire);
  ASSERT_TRUE(observer.Await(Kind::kRetryScheduled, 1));
  Duration backoff{0};
  for (const auto& e : observer.events()) {
    if (e.kind == Kind::kRetryScheduled) backoff = e.duration;
  }
  ASSERT_GT(backoff, seconds(4)) << "the seed gives a backoff long enough to watch";
  // During the backoff, a job that fires every second runs on the one worker.
  ASSERT_TRUE(scheduler.AddJob(Job("tick", "* * * * * *")).ok());
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds w) { return exec_.AwaitFinished(2, w); }, seconds(1), seconds(3)));
  EXPECT_LT(clock_.Now(), fire + backoff);
  std::vector<RecordedAttempt> attempts = exec_.attempts();
  ASSERT_GE(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].job_id, "tick");
  ASSERT_TRUE(scheduler.RemoveJob("tick").ok());
  // The retry runs once its backoff is over (the clock moves in steps: the lease is renewed).
  auto retried = [&](milliseconds w) {
    for (bool last = false;; last = true) {
      for (const RecordedAttempt& a : exec_.attempts()) {
        if (a.job_id == "flaky" && a.attempt == 2) return true;
      }
      if (last) return false;
      exec_.AwaitFinished(exec_.attempts().size() + 1, w);
    }
  };
  ASSERT_TRUE(AdvanceUntil(clock_, retried, seconds(1), seconds(31)));
  EXPECT_GE(clock_.Now(), fire + backoff);
  scheduler.Stop();
}

TEST_F(SchedulerTest, BreakerPausesTheJobAndAlerts) {
  exec_.SetBehavior([](const JobSpec&, const RunContext&) {
    return ExecResult{RunOutcome::kFailed, 2, "boom", ""};
  });
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("fragile", "*/10 * * * * *");
  j.max_consecutive_failures = 2;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 1));
  AdvanceTo(clock_, kStart + seconds(20));
  ASSERT_TRUE(n.observer.Await(Kind::kAutoPaused, 1));
  EXPECT_TRUE(coord_.GetJobState("fragile")->paused);
  EXPECT_TRUE(n.scheduler->GetJob("fragile")->paused);
  clock_.Advance(seconds(10));
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "paused"));
  EXPECT_EQ(exec_.attempts().size(), 2u);
  ASSERT_TRUE(n.scheduler->Resume("fragile").ok());
  exec_.SetBehavior(nullptr);
  clock_.Advance(seconds(10));
  ASSERT_TRUE(exec_.AwaitFinished(3));
  n.scheduler->Stop();
  EXPECT_EQ(coord_.GetJobState("fragile")->consecutive_failures, 0);
}

TEST_F(SchedulerTest, MisfireOnceRunsTheLatestMissedFire) {
  {
    Node a("a", coord_, exec_, clock_);
    JobSpec j = Job("minutely", "0 * * * * *");
    ASSERT_TRUE(a.scheduler->AddJob(j).ok());
    ASSERT_TRUE(a.scheduler->Start().ok());
    AdvanceTo(clock_, kStart + seconds(60));
    ASSERT_TRUE(exec_.AwaitFinished(1));
    a.scheduler->Stop();
  }
  clock_.Advance(minutes(10) + seconds(30));  // the whole cluster is down; 10 fires missed
  Node b("b", coord_, exec_, clock_);
  ASSERT_TRUE(b.scheduler->AddJob(Job("minutely", "0 * * * * *")).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(exec_.AwaitFinished(2));
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 9, "misfire"));
  b.scheduler->Stop();
  const auto attempts = exec_.attempts();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].scheduled_at, kStart + minutes(11)) << "the latest missed fire";
  const auto history = History(coord_, "minutely");
  int skipped = 0;
  for (const RunRecord& r : history) skipped += r.outcome == RunOutcome::kSkipped;
  EXPECT_EQ(skipped, 9);
  EXPECT_EQ(history.size(), 11u) << "every fire has one record";
}

TEST_F(SchedulerTest, MisfireAllAndSkipAndCatchupWindow) {
  for (MisfirePolicy policy : {MisfirePolicy::kAll, MisfirePolicy::kSkip}) {
    FakeClock clock(kBoot);
    MemoryCoordinator coord(clock);
    RecordingExecutor exec;
    JobSpec j = Job("m", "0 * * * * *");
    j.misfire = policy;
    j.catchup_window = minutes(5);
    {
      Node a("a", coord, exec, clock);
      ASSERT_TRUE(a.scheduler->AddJob(j).ok());
      ASSERT_TRUE(a.scheduler->Start().ok());
      AdvanceTo(clock, kStart + seconds(60));
      ASSERT_TRUE(exec.AwaitFinished(1));
      a.scheduler->Stop();
    }
    clock.Advance(minutes(10) + seconds(30));
    Node b("b", coord, exec, clock);
    ASSERT_TRUE(b.scheduler->AddJob(j).ok());
    ASSERT_TRUE(b.scheduler->Start().ok());
    // 10 missed: the 5 inside the window run (all) or are skipped (skip); older ones skipped.
    const int expect_runs = policy == MisfirePolicy::kAll ? 5 : 0;
    ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 10 - expect_runs, "misfire"));
    ASSERT_TRUE(exec.AwaitFinished(1 + expect_runs));
    b.scheduler->Stop();
    EXPECT_EQ(exec.attempts().size(), 1u + expect_runs) << ToString(policy);
    EXPECT_EQ(History(coord, "m").size(), 11u) << ToString(policy);
  }
}

TEST_F(SchedulerTest, LostRunIsFailedOrRerunOnce) {
  for (LostPolicy policy : {LostPolicy::kFail, LostPolicy::kRerun}) {
    FakeClock clock(kBoot);
    MemoryCoordinator coord(clock);
    RecordingExecutor exec;
    JobSpec j = Job("lost", "0 0 * * * *");
    j.on_lost = policy;
    // A node that vanished after claiming: its claim is never renewed.
    const FireKey fire{"lost", kStart, 0, 1};
    Result<ClaimOutcome> ghost = coord.Claim(ClaimRequest{fire, "ghost", seconds(30)});
    ASSERT_TRUE(ghost.ok() && ghost->result == ClaimOutcome::Result::kClaimed);
    SchedulerOptions opts;
    opts.housekeeping_interval = seconds(5);
    Node b("b", coord, exec, clock, opts);
    ASSERT_TRUE(b.scheduler->AddJob(j).ok());
    ASSERT_TRUE(b.scheduler->Start().ok());
    clock.Advance(seconds(35));  // past the lease
    ASSERT_TRUE(AdvanceUntilLost(clock, b.observer));
    if (policy == LostPolicy::kRerun) {
      ASSERT_TRUE(exec.AwaitFinished(1));
      EXPECT_EQ(exec.attempts()[0].attempt, 2);
      EXPECT_GT(exec.attempts()[0].fencing_token, ghost->claim->fencing_token);
    }
    b.scheduler->Stop();
    Result<std::vector<RunRecord>> records = coord.GetRun(fire.RunId());
    ASSERT_TRUE(records.ok());
    ASSERT_EQ(records->size(), policy == LostPolicy::kRerun ? 2u : 1u);
    EXPECT_EQ((*records)[0].outcome, RunOutcome::kLost);
    EXPECT_EQ((*records)[0].node_id, "ghost");
  }
}

// Renewals fail (backend unreachable for this node): the run cancels itself before ttl.
class UnreachableRenewals : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status Renew(gnomon::Claim&, Duration) override { return UnavailableError("partitioned"); }
};

TEST_F(SchedulerTest, SelfFencesWhenItCannotRenew) {
  UnreachableRenewals coord(coord_);
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  SchedulerOptions opts;
  opts.lease_ttl = seconds(30);  // margin = 10 s: fence at 20 s after the claim
  Node n("a", coord, exec_, clock_, opts);
  ASSERT_TRUE(n.scheduler->AddJob(Job("fenced", "0 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  Duration waited{0};
  while (!n.observer.Await(Kind::kSelfFenced, 1, {}, milliseconds(50)) && waited < seconds(40)) {
    clock_.Advance(seconds(1));
    waited += seconds(1);
  }
  ASSERT_EQ(n.observer.Count(Kind::kSelfFenced), 1);
  EXPECT_GE(waited, seconds(19));
  EXPECT_LE(waited, seconds(21)) << "fenced at ttl - margin after the claim, before the lease ends";
  ASSERT_TRUE(exec_.AwaitFinished(1));
  EXPECT_TRUE(exec_.attempts()[0].stopped);
  n.scheduler->Stop();
}

TEST_F(SchedulerTest, LeaseIsRenewedWhileRunning) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  Node n("a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->AddJob(Job("long", "0 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  for (int i = 1; i <= 6; ++i) {  // 2 minutes: four times the lease
    clock_.Advance(seconds(10));
    ASSERT_TRUE(n.observer.Await(Kind::kLeaseRenewed, i));
  }
  EXPECT_EQ(n.observer.Count(Kind::kSelfFenced), 0);
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(1));
  n.scheduler->Stop();
  EXPECT_EQ(History(coord_, "long")[0].outcome, RunOutcome::kSucceeded);
}

TEST_F(SchedulerTest, GracefulStopCancelsAfterGraceAndRecords) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  SchedulerOptions opts;
  opts.shutdown_grace = seconds(20);
  Node n("a", coord_, exec_, clock_, opts);
  ASSERT_TRUE(n.scheduler->AddJob(Job("stuck", "0 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  std::jthread stopper([&] { n.scheduler->Stop(); });
  // Stop waits for the grace on the fake clock; nothing is cancelled before it.
  Duration passed{0};
  while (!exec_.AwaitFinished(1, milliseconds(50)) && passed < seconds(60)) {
    clock_.Advance(seconds(1));
    passed += seconds(1);
  }
  stopper.join();
  EXPECT_GE(passed, seconds(20)) << "cancelled before shutdown_grace";
  ASSERT_EQ(exec_.attempts().size(), 1u);
  EXPECT_TRUE(exec_.attempts()[0].stopped);
  const auto history = History(coord_, "stuck");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kCancelled);
  EXPECT_NE(history[0].error.find("graceful shutdown"), std::string::npos);
  Result<std::vector<ExpiredFire>> open = coord_.ListExpired(10);
  clock_.Advance(minutes(5));
  open = coord_.ListExpired(10);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->empty()) << "the lease was released, nothing is left running";
}

// claim_ahead: a fire of an overlap = allow job is claimed before its instant and started at it;
// one of a forbid job is claimed at its instant (whether a run is still going is decided then).
TEST_F(SchedulerTest, AllowJobsAreClaimedAheadAndStartAtTheirInstant) {
  SchedulerOptions opts;
  opts.claim_ahead = milliseconds(200);
  Node n("a", coord_, exec_, clock_, opts);
  JobSpec ahead = Job("ahead", "*/10 * * * * *");
  ahead.overlap = OverlapPolicy::kAllow;
  ASSERT_TRUE(n.scheduler->AddJob(ahead).ok());
  ASSERT_TRUE(n.scheduler->AddJob(Job("strict", "*/10 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  const Instant instant = kStart + seconds(10);
  AdvanceTo(clock_, instant - milliseconds(150));
  ASSERT_TRUE(n.observer.Await(Kind::kClaimed, 1));
  std::vector<RunRecord> held = History(coord_, "ahead");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].scheduled_at, instant);
  EXPECT_EQ(held[0].outcome, RunOutcome::kRunning);
  EXPECT_TRUE(History(coord_, "strict").empty()) << "a forbid job was claimed ahead";
  EXPECT_EQ(exec_.attempts().size(), 0u) << "a fire claimed ahead started before its instant";
  EXPECT_EQ(n.observer.Count(Kind::kRunStarted), 0);

  AdvanceTo(clock_, instant);
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 2));
  for (const SchedulerEvent& e : n.observer.events()) {
    if (e.kind == Kind::kRunStarted) {
      EXPECT_EQ(e.at, instant) << e.job_id;
      EXPECT_EQ(e.duration, Duration(0)) << e.job_id << ": lateness";
    }
    if (e.kind == Kind::kClaimed && e.job_id == "ahead") {
      EXPECT_EQ(e.duration, -milliseconds(150)) << "claimed 150 ms ahead";
    }
  }
  n.scheduler->Stop();
  for (const std::string job : {"ahead", "strict"}) {
    const std::vector<RunRecord> history = History(coord_, job);
    ASSERT_EQ(history.size(), 1u) << job;
    EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded) << job;
    EXPECT_EQ(history[0].started_at, instant) << job;
  }
}

// A fire claimed ahead is this node's: a graceful stop before its instant runs it at the instant
// (no peer may claim it any more), rather than dropping it to be found lost after its lease.
TEST_F(SchedulerTest, AStopBeforeTheInstantOfAFireClaimedAheadRunsIt) {
  SchedulerOptions opts;
  opts.claim_ahead = milliseconds(200);
  opts.shutdown_grace = seconds(20);
  Node n("a", coord_, exec_, clock_, opts);
  JobSpec ahead = Job("ahead", "*/10 * * * * *");
  ahead.overlap = OverlapPolicy::kAllow;
  ASSERT_TRUE(n.scheduler->AddJob(ahead).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  const Instant instant = kStart + seconds(10);
  AdvanceTo(clock_, instant - milliseconds(100));
  ASSERT_TRUE(n.observer.Await(Kind::kClaimed, 1));
  std::atomic<bool> stopped{false};
  std::jthread stopper([&] {
    n.scheduler->Stop();
    stopped = true;
  });
  ASSERT_TRUE(clock_.AwaitWaiters(1));
  EXPECT_EQ(exec_.attempts().size(), 0u);
  // Stop waits for the instant on the fake clock; the clock then stands still. Stop returns when
  // the run's report is in, which needs no time to pass (moving the clock on could expire the
  // lease before the report: another case).
  clock_.Advance(milliseconds(100));
  const bool finished = exec_.AwaitFinished(1);
  if (!finished) clock_.Advance(seconds(30));  // let Stop end; the test fails below
  stopper.join();
  ASSERT_TRUE(finished);
  EXPECT_TRUE(stopped);
  ASSERT_EQ(exec_.attempts().size(), 1u);
  EXPECT_EQ(exec_.attempts()[0].scheduled_at, instant);
  const std::vector<RunRecord> history = History(coord_, "ahead");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded);
  EXPECT_GE(history[0].started_at, instant);
}

// Claimed fires still queued for a worker when shutdown_grace ends are recorded cancelled and
// their leases released: none is left open for the lost-run scan.
TEST_F(SchedulerTest, ClaimedFiresThatCouldNotStartBeforeTheStopAreRecordedCancelled) {
  exec_.SetBehavior([this](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec_.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  SchedulerOptions opts;
  opts.node_id = "a";
  opts.shutdown_grace = seconds(5);
  opts.worker_threads = 1;  // the first run holds the only worker; the second fire waits
  RecordingObserver observer;
  opts.observer = &observer;
  Scheduler scheduler(opts, coord_, exec_, clock_);
  ASSERT_TRUE(scheduler.AddJob(Job("one", "0 * * * * *")).ok());
  ASSERT_TRUE(scheduler.AddJob(Job("two", "0 * * * * *")).ok());
  ASSERT_TRUE(scheduler.Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(observer.Await(Kind::kClaimed, 2));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  std::atomic<bool> stopped{false};
  std::jthread stopper([&] {
    scheduler.Stop();
    stopped = true;
  });
  // The clock moves until shutdown_grace has passed and the running attempt was cancelled, then
  // stands still (the stop needs no more time; moving on could expire leases before reports).
  bool cancelled = false;
  for (Duration passed{0}; !cancelled && passed < seconds(60); passed += seconds(1)) {
    clock_.Advance(seconds(1));
    cancelled = exec_.AwaitFinished(1, milliseconds(20));
  }
  stopper.join();
  EXPECT_TRUE(stopped);
  for (const std::string job : {"one", "two"}) {
    const std::vector<RunRecord> history = History(coord_, job);
    ASSERT_EQ(history.size(), 1u) << job;
    EXPECT_EQ(history[0].outcome, RunOutcome::kCancelled) << job;
    EXPECT_NE(history[0].error.find("graceful shutdown"), std::string::npos) << job;
  }
  clock_.Advance(minutes(5));
  Result<std::vector<ExpiredFire>> open = coord_.ListExpired(10);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->empty()) << "a claimed fire was left open";
}

// A gate for calls into a test coordinator: Pass() counts the call and blocks while the gate is
// closed (`first_only`: only the first call is held).
class Gate {
 public:
  explicit Gate(bool first_only = false) : first_only_(first_only) {}
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    const bool hold = !first_only_ || calls_ == 0;
    ++calls_;
    cv_.notify_all();
    if (hold) cv_.wait(lock, [&] { return open_; });
  }
  // Waits (real time, up to 10 s) for a first call.
  bool AwaitCall() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return calls_ > 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  const bool first_only_;
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  bool open_ = false;
};

// The first ClaimMany call waits until the test opens the gate.
class GatedClaims : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs) override {
    gate.Pass();
    return ForwardingCoordinator::ClaimMany(reqs);
  }
  Gate gate{/*first_only=*/true};
};

// An overloaded node (here: its one worker held) does not claim a fire as on time after the
// fire's claim waited past the claim window: the fire goes through the misfire policy (here skip:
// recorded skipped) instead of running late as if on time.
TEST_F(SchedulerTest, AClaimThatWaitedPastTheClaimWindowIsAMisfire) {
  GatedClaims gated(coord_);
  SchedulerOptions opts;
  opts.node_id = "a";
  opts.worker_threads = 1;
  RecordingObserver observer;
  opts.observer = &observer;
  Scheduler scheduler(opts, gated, exec_, clock_);
  // 257 jobs at one instant: two claim batches (256 + 1), the second queued behind the first.
  for (int k = 0; k < 257; ++k) {
    JobSpec j = Job("j" + std::to_string(k), "0 * * * * *");
    j.misfire = MisfirePolicy::kSkip;
    ASSERT_TRUE(scheduler.AddJob(j).ok());
  }
  ASSERT_TRUE(scheduler.Start().ok());
  ASSERT_TRUE(clock_.AwaitWaiters(2));  // the loop and the watchdog
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(gated.gate.AwaitCall());      // the only worker is in the first batch's claim
  ASSERT_TRUE(clock_.AwaitWaiters(2));      // the loop waits again: the second batch is queued
  AdvanceTo(clock_, kStart + seconds(62));  // it has waited 2 s > claim_grace
  gated.gate.Open();
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return observer.Await(Kind::kSkipped, 1, "misfire", t); },
      seconds(1), seconds(30)));
  ASSERT_TRUE(exec_.AwaitFinished(256));
  scheduler.Stop();
  EXPECT_EQ(observer.Count(Kind::kSkipped, "misfire"), 1);
  EXPECT_EQ(exec_.attempts().size(), 256u) << "the late batch ran as if on time";
}

// The first ReportMany call waits until the test opens the gate; every call's size is kept.
class GatedReports : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  std::vector<Status> ReportMany(const std::vector<ReportRequest>& reqs) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(reqs.size());
    }
    gate.Pass();
    return ForwardingCoordinator::ReportMany(reqs);
  }
  std::vector<size_t> Sizes() {
    std::lock_guard<std::mutex> lock(mu);
    return sizes;
  }
  Gate gate{/*first_only=*/true};
  std::mutex mu;
  std::vector<size_t> sizes;
};

// The final reports of runs that end while a report call is out go to the backend together, in
// the next call, rather than one call (and one waiting worker) each.
TEST_F(SchedulerTest, FinalReportsOfRunsThatEndTogetherGoInOneCall) {
  GatedReports gated(coord_);
  Node n("a", gated, exec_, clock_);
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(n.scheduler->AddJob(Job("j" + std::to_string(k), "0 * * * * *")).ok());
  }
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(gated.gate.AwaitCall());   // the first report call is out
  ASSERT_TRUE(exec_.AwaitFinished(10));  // every run has ended
  gated.gate.Open();
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 10));
  n.scheduler->Stop();
  // The first call carries the reports queued when the drain started (1 to 10); those of the
  // runs that ended while it was out go in the next (one more, should the last of them be queued
  // only just after the drain found the queue empty).
  const std::vector<size_t> sizes = gated.Sizes();
  size_t total = 0, largest = 0;
  for (size_t k : sizes) {
    total += k;
    largest = std::max(largest, k);
  }
  EXPECT_EQ(total, 10u);
  EXPECT_LE(sizes.size(), 3u);
  EXPECT_GE(largest, 4u) << "the reports queued meanwhile went in one call";
  for (const RunRecord& r : History(coord_, "j9")) {
    EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.run_id;
  }
}

TEST_F(SchedulerTest, PauseResumeAndTriggerNow) {
  Node n("a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->AddJob(Job("manual", "0 0 1 1 *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  Result<std::string> run = n.scheduler->TriggerNow("manual");
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 1));
  EXPECT_EQ(exec_.attempts()[0].run_id, *run);
  ASSERT_TRUE(n.scheduler->Pause("manual").ok());
  clock_.Advance(milliseconds(5));
  ASSERT_TRUE(n.scheduler->TriggerNow("manual").ok());
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "paused"));
  EXPECT_EQ(exec_.attempts().size(), 1u);
  ASSERT_TRUE(n.scheduler->Resume("manual").ok());
  EXPECT_FALSE(n.scheduler->Pause("nope").ok());
  EXPECT_EQ(n.scheduler->TriggerNow("nope").status().code(), StatusCode::kNotFound);
  n.scheduler->Stop();
}

// A trigger's parameters are merged over the job's defaults for that fire only: the run sees
// them and its record keeps them; a scheduled fire sees the defaults.
TEST_F(SchedulerTest, TriggerParamsAreMergedOverTheDefaultsForThatFire) {
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("params", "0 * * * * *");
  j.params = R"({"month":"prev","dry_run":false})";
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  clock_.Advance(milliseconds(5));
  Result<std::string> run = n.scheduler->TriggerNow("params", R"({"dry_run":true,"who":"ops"})");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 1));
  EXPECT_EQ(exec_.attempts()[0].params, R"({"dry_run":true,"month":"prev","who":"ops"})");
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 2));
  EXPECT_EQ(exec_.attempts()[1].params, j.params);
  EXPECT_EQ(n.scheduler->TriggerNow("params", "[1]").status().code(), StatusCode::kInvalidArgument);
  n.scheduler->Stop();
  std::map<std::string, std::string> params_of;
  for (const RunRecord& r : History(coord_, "params")) params_of[r.run_id] = r.params;
  EXPECT_EQ(params_of.at(*run), R"({"dry_run":true,"month":"prev","who":"ops"})");
  EXPECT_EQ(params_of.at(exec_.attempts()[1].run_id), j.params);
  EXPECT_EQ(params_of.size(), 2u);
}

TEST_F(SchedulerTest, ShardsFireSeparately) {
  Node n("a", coord_, exec_, clock_);
  JobSpec j = Job("sharded", "0 * * * * *");
  j.shards = 3;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(exec_.AwaitFinished(3));
  n.scheduler->Stop();
  std::set<std::string> runs;
  for (const auto& a : exec_.attempts()) {
    runs.insert(a.run_id);
    EXPECT_EQ(a.shard_count, 3);
  }
  EXPECT_EQ(runs.size(), 3u);
  EXPECT_TRUE(runs.count("sharded@" + std::to_string((kStart + seconds(60)).unix_millis()) + "#2"));
}

TEST_F(SchedulerTest, DstGapFiresOnceAfterTheGap) {
  // Europe/Berlin springs forward on 2026-03-29 at 02:00 -> 03:00.
  FakeClock clock(*Instant::ParseRfc3339("2026-03-29T00:00:00Z"));
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  Node n("a", coord, exec, clock);
  JobSpec j = Job("berlin", "30 2 * * *");
  j.timezone = "Europe/Berlin";
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  // 02:30 does not exist that day: the fire comes at 03:00 CEST (01:00Z), then 02:30 CEST.
  AdvanceTo(clock, *Instant::ParseRfc3339("2026-03-29T01:00:00Z"));
  ASSERT_TRUE(exec.AwaitFinished(1));
  AdvanceTo(clock, *Instant::ParseRfc3339("2026-03-30T00:30:00Z"));
  ASSERT_TRUE(exec.AwaitFinished(2));
  n.scheduler->Stop();
  ASSERT_EQ(exec.attempts().size(), 2u);
  EXPECT_EQ(exec.attempts()[0].scheduled_at.ToRfc3339Seconds(), "2026-03-29T01:00:00Z");
  EXPECT_EQ(exec.attempts()[1].scheduled_at.ToRfc3339Seconds(), "2026-03-30T00:30:00Z");
}

TEST_F(SchedulerTest, InvalidJobsAreRejectedWholesale) {
  Node n("a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->AddJob(Job("keep", "* * * * *")).ok());
  JobSpec bad = Job("bad", "0 25 * * *");
  Status s = n.scheduler->SetJobs({Job("new", "* * * * *"), bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hour: 25"), std::string::npos);
  const auto jobs = n.scheduler->Jobs();
  ASSERT_EQ(jobs.size(), 1u) << "nothing changed";
  EXPECT_EQ(jobs[0].spec.id, "keep");
  EXPECT_FALSE(n.scheduler->SetJobs({Job("x", "* * * * *"), Job("x", "* * * * *")}).ok());
}

}  // namespace
}  // namespace gnomon

namespace gnomon {
namespace {

TEST(SchedulerRetentionTest, HousekeepingPrunesHistoryToKeepLast) {
  FakeClock clock(kBoot);
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = minutes(10);  // the first pass runs at start, the next much later
  Node n("a", coord, exec, clock, opts);
  JobSpec j = Job("pruned", "*/10 * * * * *");
  j.history_keep = 3;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  for (int i = 1; i <= 5; ++i) {
    AdvanceTo(clock, kStart + seconds(10 * i));
    ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, i));
  }
  EXPECT_EQ(History(coord, "pruned").size(), 5u);
  j.schedule = "0 0 1 1 *";  // no more fires while time moves on
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  // The next housekeeping pass (pruning runs at most once a minute) trims the history.
  clock.Advance(minutes(10));
  for (int i = 0; i < 250 && History(coord, "pruned").size() > 3; ++i) {
    n.observer.Await(Kind::kError, 1, {}, milliseconds(20));  // a bounded real wait
  }
  n.scheduler->Stop();
  const auto history = History(coord, "pruned");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history.back().scheduled_at, kStart + seconds(50)) << "the newest are kept";
}

}  // namespace
}  // namespace gnomon

namespace gnomon {
namespace {

class CountingPrunes : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override {
    ++prunes;
    return ForwardingCoordinator::PruneHistory(job_id, keep_last, max_age);
  }
  std::atomic<int> prunes{0};
};

// The hourly sweep over every job (max_age of jobs that stopped running) is spread over the hour:
// with 5-s passes, 1/720 of the jobs a pass, not all of them in the first minute.
TEST(SchedulerRetentionTest, TheHourlySweepIsSpreadOverTheHour) {
  FakeClock clock(kBoot);
  MemoryCoordinator memory(clock);
  CountingPrunes coord(memory);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node n("a", coord, exec, clock, opts);
  for (int k = 0; k < 1440; ++k) {
    ASSERT_TRUE(n.scheduler->AddJob(Job("j" + std::to_string(k), "0 0 1 1 *")).ok());
  }
  ASSERT_TRUE(n.scheduler->Start().ok());
  for (int pass = 1; pass <= 3; ++pass) {
    for (int i = 0; i < 500 && coord.prunes < 2 * pass; ++i) {
      n.observer.Await(Kind::kError, 1, {}, milliseconds(10));  // a bounded real wait
    }
    n.observer.Await(Kind::kError, 1, {}, milliseconds(100));  // room for more (there must be none)
    EXPECT_EQ(coord.prunes, 2 * pass) << "pass " << pass << ": 1440 jobs / 720 passes an hour";
    clock.Advance(seconds(5));
  }
  n.scheduler->Stop();
}

TEST(SchedulerSharedStateTest, PauseOnAnotherNodeIsSeenWithinThePollInterval) {
  FakeClock clock(kBoot);
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  Node a("a", coord, exec, clock);
  ASSERT_TRUE(a.scheduler->AddJob(Job("shared", "0 0 1 1 *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));  // the first poll, at start
  EXPECT_FALSE(a.scheduler->GetJob("shared")->paused);
  // Another node pauses the job in the backend; the next poll (500 ms later) sees it, long
  // before the next housekeeping pass (5 s).
  ASSERT_TRUE(coord.SetPaused("shared", true, "api").ok());
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 2));
  EXPECT_TRUE(a.scheduler->GetJob("shared")->paused);
  EXPECT_EQ(a.scheduler->GetJob("shared")->pause_reason, "api");
  a.scheduler->Stop();
}

// Job-state reads answer late once armed: the read is made, then its answer held until released
// (a slow backend answering a read from before a change).
class LateStateReads : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& ids) override {
    Result<std::vector<JobState>> answer = ForwardingCoordinator::GetJobStates(ids);
    std::unique_lock<std::mutex> lock(mu_);
    if (armed_) {
      armed_ = false;
      holding_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !holding_; });
    }
    return answer;
  }
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  bool AwaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool holding_ = false;
};

// A state read made before a pause and answered after it does not undo the pause.
TEST(SchedulerSharedStateTest, AStateReadAnsweredLateDoesNotUndoANewerPause) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  LateStateReads coord(backend);
  RecordingExecutor exec;
  Node a("a", coord, exec, clock);
  ASSERT_TRUE(a.scheduler->AddJob(Job("shared", "0 0 1 1 *")).ok());
  ASSERT_TRUE(a.scheduler->AddJob(Job("other", "0 0 1 1 *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));
  // A change elsewhere makes the next poll read every job's state; its answer ("shared" not
  // paused) is held while this node pauses "shared".
  coord.Arm();
  ASSERT_TRUE(backend.SetPaused("other", true, "elsewhere").ok());
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(coord.AwaitHeld());
  ASSERT_TRUE(a.scheduler->Pause("shared", "api").ok());
  coord.Release();
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 2));
  EXPECT_TRUE(a.scheduler->GetJob("shared")->paused);
  EXPECT_EQ(a.scheduler->GetJob("shared")->pause_reason, "api");
  EXPECT_TRUE(a.scheduler->GetJob("other")->paused);
  a.scheduler->Stop();
}

}  // namespace
}  // namespace gnomon

namespace gnomon {
namespace {

// Renewals hang (a dead connection) until released.
class HangingRenewals : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status Renew(gnomon::Claim& claim, Duration ttl) override {
    gate.Pass();
    return ForwardingCoordinator::Renew(claim, ttl);
  }
  bool AwaitCall() { return gate.AwaitCall(); }
  void Release() { gate.Open(); }
  Gate gate;
};

// Chaos F5: a renewal stuck on a dead connection must not delay the self-fence.
TEST(SchedulerFenceTest, SelfFencesWhileARenewalHangs) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  HangingRenewals coord(backend);
  RecordingExecutor exec;
  exec.SetBehavior([&](const JobSpec&, const RunContext& ctx) {
    const bool stopped = exec.WaitForStopOrRelease(ctx);
    return ExecResult{stopped ? RunOutcome::kCancelled : RunOutcome::kSucceeded, {}, "", ""};
  });
  SchedulerOptions opts;
  opts.lease_ttl = seconds(30);  // renew at 10 s, fence at 20 s after the claim
  Node n("a", coord, exec, clock, opts);
  ASSERT_TRUE(n.scheduler->AddJob(Job("stuck-renew", "0 * * * * *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock, kStart + seconds(60));
  ASSERT_TRUE(exec.AwaitStarted(1));
  clock.Advance(seconds(10));
  ASSERT_TRUE(coord.AwaitCall()) << "no renewal at ttl/3";
  Duration waited{0};
  while (!n.observer.Await(Kind::kSelfFenced, 1, {}, milliseconds(50)) && waited < seconds(20)) {
    clock.Advance(seconds(1));
    waited += seconds(1);
  }
  EXPECT_EQ(n.observer.Count(Kind::kSelfFenced), 1) << "the hanging renewal delayed the fence";
  EXPECT_LE(waited, seconds(11));
  ASSERT_TRUE(exec.AwaitFinished(1));
  EXPECT_TRUE(exec.attempts()[0].stopped);
  coord.Release();
  n.scheduler->Stop();
}

// Backend down while misfires are recorded: the records are written once it is back (chaos F3).
class FailingSkips : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status RecordSkipped(const FireKey& fire, const std::string& node,
                       const std::string& reason) override {
    if (down) return UnavailableError("backend down");
    return ForwardingCoordinator::RecordSkipped(fire, node, reason);
  }
  std::atomic<bool> down{false};
};

TEST(SchedulerMisfireTest, SkipRecordsThatFailAreWrittenLater) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  FailingSkips coord(backend);
  RecordingExecutor exec;
  {
    Node a("a", coord, exec, clock);
    ASSERT_TRUE(a.scheduler->AddJob(Job("m", "0 * * * * *")).ok());
    ASSERT_TRUE(a.scheduler->Start().ok());
    AdvanceTo(clock, kStart + seconds(60));
    ASSERT_TRUE(exec.AwaitFinished(1));
    a.scheduler->Stop();
  }
  clock.Advance(minutes(10) + seconds(30));
  coord.down = true;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node b("b", coord, exec, clock, opts);
  ASSERT_TRUE(b.scheduler->AddJob(Job("m", "0 * * * * *")).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(exec.AwaitFinished(2));              // misfire = once: the latest missed fire runs
  ASSERT_TRUE(b.observer.Await(Kind::kError, 9));  // the 9 skip records could not be written
  EXPECT_EQ(b.observer.Count(Kind::kSkipped, "misfire"), 0);
  coord.down = false;
  for (int i = 0; i < 10 && !b.observer.Await(Kind::kSkipped, 9, "misfire", milliseconds(200));
       ++i) {
    clock.Advance(seconds(5));
  }
  EXPECT_EQ(b.observer.Count(Kind::kSkipped, "misfire"), 9);
  b.scheduler->Stop();
  EXPECT_EQ(History(backend, "m").size(), 11u) << "every fire has its record";
}

// The backend is unreachable for claims too (and skip records, as FailingSkips) while `down`.
class Outage : public FailingSkips {
 public:
  using FailingSkips::FailingSkips;
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    if (down) return UnavailableError("backend down");
    return FailingSkips::Claim(req);
  }
};

// misfire = once after an outage: the latest fire of the outage runs once, even though the first
// fire after the outage already ran on time (it was missed all the same); the older one is
// recorded skipped.
TEST(SchedulerMisfireTest, OutageRunsItsLatestMissedFireAfterTheNextOnTimeFire) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  Outage coord(backend);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node a("a", coord, exec, clock, opts);
  ASSERT_TRUE(a.scheduler->AddJob(Job("t", "*/10 * * * * *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) {
    while (clock.Now() < t) {
      clock.Advance(std::min<Duration>(seconds(1), t - clock.Now()));
      a.observer.Await(Kind::kClaimed, 1000, {}, milliseconds(20));  // lets the engine react
    }
  };
  step_to(kStart + seconds(10));
  ASSERT_TRUE(exec.AwaitFinished(1));
  coord.down = true;  // the fires at :20 and :30 cannot be claimed
  step_to(kStart + seconds(37));
  ASSERT_GE(a.observer.Count(Kind::kError), 2);
  coord.down = false;
  step_to(kStart + seconds(40));
  ASSERT_TRUE(exec.AwaitFinished(2));  // :40 on time
  step_to(kStart + seconds(47));       // a housekeeping pass after :40's claim window
  ASSERT_TRUE(exec.AwaitFinished(3));
  ASSERT_TRUE(a.observer.Await(Kind::kSkipped, 1, "misfire"));
  a.scheduler->Stop();
  const auto attempts = exec.attempts();
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[1].scheduled_at, kStart + seconds(40));
  EXPECT_EQ(attempts[2].scheduled_at, kStart + seconds(30)) << "the latest missed fire, once";
  const auto history = History(backend, "t");
  ASSERT_EQ(history.size(), 4u) << "every fire has one record";
  for (const RunRecord& r : history) {
    EXPECT_EQ(r.outcome == RunOutcome::kSkipped, r.scheduled_at == kStart + seconds(20))
        << r.run_id;
  }
}

// A fire whose claim failed is retried on time only while no newer fire of the job was handed
// out: retried after the newer one's claim, it would run on time with a higher fencing token than
// a newer fire (chaos F3@etcd). It is a misfire instead: misfire = once runs it as a catch-up.
TEST(SchedulerMisfireTest, AFailedFireOvertakenByANewerClaimIsAMisfireNotAnOnTimeRetry) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  Outage coord(backend);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);  // passes at kStart + 10 s, 15 s, 20 s, ...
  opts.claim_grace = seconds(3);            // longer than the job's period
  opts.claim_ahead = Duration::zero();      // each fire is claimed at its instant
  Node a("a", coord, exec, clock, opts);
  // overlap = allow: the catch-up of :13 must not meet an on-time run still live and be skipped
  // (overlap = forbid would rightly skip it; a slow machine, under TSan, gets there).
  JobSpec t = Job("t", "* * * * * *");
  t.overlap = OverlapPolicy::kAllow;
  ASSERT_TRUE(a.scheduler->AddJob(t).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) {
    while (clock.Now() < t) {
      clock.Advance(std::min<Duration>(milliseconds(250), t - clock.Now()));
      a.observer.Await(Kind::kClaimed, 1000, {}, milliseconds(20));  // lets the engine react
    }
  };
  step_to(kStart + seconds(12) + milliseconds(500));
  ASSERT_GE(a.observer.Count(Kind::kClaimed), 1);
  coord.down = true;  // the fire at :13 cannot be claimed
  const int errors = a.observer.Count(Kind::kError);
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(a.observer.Await(Kind::kError, errors + 1));
  coord.down = false;
  step_to(kStart + seconds(14) + milliseconds(500));  // :14 claimed; then the pass at :15
  step_to(kStart + seconds(21));                      // :14's claim window closed; pass at :20
  auto missed_claimed = [&] {
    for (const SchedulerEvent& ev : a.observer.events()) {
      if (ev.kind == Kind::kClaimed && ev.scheduled_at == kStart + seconds(13)) return true;
    }
    return false;
  };
  ASSERT_TRUE(AdvanceUntil(
      clock,
      [&](milliseconds wait) {
        if (missed_claimed()) return true;
        a.observer.Await(Kind::kClaimed, a.observer.Count(Kind::kClaimed) + 1, {}, wait);
        return missed_claimed();
      },
      milliseconds(100), seconds(10)))
      << "misfire = once runs the missed fire; events from :10 on:" << [&] {
           std::string out;
           for (const SchedulerEvent& ev : a.observer.events()) {
             if (ev.scheduled_at < kStart + seconds(10)) continue;
             out += "\n  " + std::string(ToString(ev.kind)) + " " + ev.run_id +
                    (ev.catch_up ? " catch_up" : "") + " " + ev.detail;
           }
           return out;
         }();
  a.scheduler->Stop();
  std::map<Instant, const SchedulerEvent*> on_time;
  const SchedulerEvent* missed = nullptr;
  const auto events = a.observer.events();
  for (const SchedulerEvent& ev : events) {
    // (The fires up to kBoot are the start's; from :10 on, the run is steady.)
    if (ev.kind != Kind::kClaimed || ev.scheduled_at < kStart + seconds(10)) continue;
    if (ev.scheduled_at == kStart + seconds(13)) {
      missed = &ev;
    } else {
      EXPECT_FALSE(ev.catch_up) << ev.run_id;
      on_time[ev.scheduled_at] = &ev;
    }
  }
  ASSERT_NE(missed, nullptr);
  EXPECT_TRUE(missed->catch_up) << "claimed on time after :14, with a higher token";
  ASSERT_TRUE(on_time.count(kStart + seconds(14)));
  EXPECT_GT(missed->fencing_token, on_time[kStart + seconds(14)]->fencing_token);
  int64_t last = 0;
  for (const auto& [at, ev] : on_time) {
    EXPECT_GT(ev->fencing_token, last) << "on-time tokens rise with the fires' instants";
    last = ev->fencing_token;
  }
}

// Reports fail while `down` (a short backend outage as the run ends).
class FailingReports : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override {
    ++reports;
    if (down) return UnavailableError("backend down");
    return ForwardingCoordinator::Report(claim, record, final);
  }
  std::atomic<bool> down{false};
  std::atomic<int> reports{0};
};

// A run that finished while the backend was briefly down is recorded with its outcome once the
// backend answers again (its lease still holds), not resolved as lost and run again.
TEST(SchedulerReportTest, AReportThatFailsTransientlyIsSentAgainWhileTheLeaseHolds) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  FailingReports coord(backend);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.lease_ttl = seconds(30);
  opts.housekeeping_interval = seconds(5);
  Node a("a", coord, exec, clock, opts);
  JobSpec job = Job("r", "0 * * * * *");
  job.on_lost = LostPolicy::kRerun;
  ASSERT_TRUE(a.scheduler->AddJob(job).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  coord.down = true;
  AdvanceTo(clock, kStart + seconds(60));
  ASSERT_TRUE(exec.AwaitFinished(1));
  // Two failed reports (100 ms apart on the fake clock), then the backend is back.
  for (int i = 0; i < 100 && coord.reports.load() < 2; ++i) {
    clock.Advance(milliseconds(50));
    a.observer.Await(Kind::kRunFinished, 1, {}, milliseconds(20));
  }
  ASSERT_GE(coord.reports.load(), 2);
  coord.down = false;
  ASSERT_TRUE(AdvanceUntil(
      clock, [&](milliseconds w) { return a.observer.Await(Kind::kRunFinished, 1, {}, w); },
      milliseconds(100), seconds(5)));
  EXPECT_EQ(a.observer.Count(Kind::kError), 0) << "the report was not given up";
  // Past the lease: nothing is lost and nothing runs again.
  clock.Advance(seconds(40));
  EXPECT_FALSE(a.observer.Await(Kind::kLostRun, 1, {}, milliseconds(300)));
  a.scheduler->Stop();
  EXPECT_EQ(exec.attempts().size(), 1u);
  const auto history = History(backend, "r");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded);
}

}  // namespace
}  // namespace gnomon

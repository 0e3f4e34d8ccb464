// Engine policies, driven by FakeClock (no real sleeps): the engine's loop and watchdog wait on
// the fake clock, so a test advances time and then waits for the *events* the engine records.
// Firing, ownership, the backend clock, overlap, admission, cancels, backfills, timeouts, retries.
#include "gnomon/scheduler.h"

#include "gnomon/testing/forwarding_coordinator.h"
#include "src/schedule/scheduler_test_util.h"

namespace gnomon::scheduler_test {
namespace {

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
// The jobs first fire at +20 s: a node's live set is read just after its own heartbeat, so the
// set its first pass reads may miss a node started after it (or a pass that finds the previous
// heartbeat still under way is skipped). 15 s of fake time give every node passes enough to
// read all three heartbeats before ownership is asserted.
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
      ASSERT_TRUE(n->scheduler->AddJob(Job(id, "20-59/10 * * * * *")).ok());
    }
    ASSERT_TRUE(n->scheduler->Start().ok());
  }
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
  step_to(kStart + seconds(19));
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
    step_to(kStart + seconds(10 + 10 * round));
    ASSERT_TRUE(exec_.AwaitFinished(12 * round)) << "round " << round;
  }
  step_to(kStart + seconds(42));
  ASSERT_TRUE(exec_.AwaitFinished(36));
  for (const RecordedAttempt& at : exec_.attempts()) {
    EXPECT_EQ(at.node_id, internal::RendezvousOwner(all, at.job_id, 0)) << at.run_id;
  }
  EXPECT_EQ(claims(), 36) << "one claim per fire in steady state";

  // c stops (at +48 s); its heartbeat is still live (past +53 s), so a and b keep ranking it
  // first for its jobs: they take its fires over after 500 ms (rank 1) and run each once.
  step_to(kStart + seconds(48));
  c.scheduler->Stop();
  running.erase("c");
  int owned_by_c = 0;
  for (const std::string& id : ids) owned_by_c += internal::RendezvousOwner(all, id, 0) == "c";
  ASSERT_GT(owned_by_c, 0);
  step_to(kStart + seconds(50));
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
    ASSERT_EQ(last.scheduled_at, kStart + seconds(50));
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

// Counts the claims the backend answered kBusy (overlap = buffer_*), by run id, so a test can
// wait until the engine has tried a fire before it moves the clock on.
class BusyCounter : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    Result<ClaimOutcome> out = ForwardingCoordinator::Claim(req);
    Count(req, out);
    return out;
  }
  std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs) override {
    std::vector<Result<ClaimOutcome>> outs = ForwardingCoordinator::ClaimMany(reqs);
    for (size_t i = 0; i < reqs.size() && i < outs.size(); ++i) Count(reqs[i], outs[i]);
    return outs;
  }
  // Waits (real time, up to 10 s) until a claim of `fire` was answered busy.
  bool AwaitBusy(const FireKey& fire) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return busy_.count(fire.RunId()) > 0; });
  }

 private:
  void Count(const ClaimRequest& req, const Result<ClaimOutcome>& out) {
    if (!out.ok() || out->result != ClaimOutcome::Result::kBusy) return;
    std::lock_guard<std::mutex> lock(mu_);
    busy_.insert(req.fire.RunId());
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> busy_;
};

// A job every 10 s whose first run lasts until Release (a lease that outlasts the test's jumps).
struct LongFirstRun {
  LongFirstRun(RecordingExecutor& exec, BusyCounter& busy, Clock& clock, OverlapPolicy overlap)
      : n("a", busy, exec, clock, Options()) {
    exec.SetBehavior([&exec, this](const JobSpec&, const RunContext& ctx) {
      if (runs.fetch_add(1) == 0) exec.WaitForStopOrRelease(ctx);
      return ExecResult{};
    });
    JobSpec j = Job("long", "*/10 * * * * *");
    j.overlap = overlap;
    EXPECT_TRUE(n.scheduler->AddJob(j).ok());
    EXPECT_TRUE(n.scheduler->Start().ok());
  }
  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_ttl = minutes(5);
    return o;
  }
  static FireKey At(int second) { return FireKey{"long", kStart + seconds(second), 0, 1}; }
  std::atomic<int> runs{0};
  Node n;
};

// overlap = buffer_one under a run longer than two periods: the first fire that came due waits
// and starts when the run ends (within ClaimDispatcher::kBufferRetry), the next is skipped.
TEST_F(SchedulerTest, BufferOneKeepsOneFireWaitingForALongRun) {
  BusyCounter busy(coord_);
  LongFirstRun job(exec_, busy, clock_, OverlapPolicy::kBufferOne);
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  AdvanceTo(clock_, kStart + seconds(20));
  ASSERT_TRUE(busy.AwaitBusy(LongFirstRun::At(20)));
  AdvanceTo(clock_, kStart + seconds(30));
  ASSERT_TRUE(job.n.observer.Await(Kind::kSkipped, 1, "overlap"));
  EXPECT_EQ(exec_.started(), 1) << "the fire of :20 waits; it does not run beside the long one";
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(1));
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return exec_.AwaitFinished(2, t); }, milliseconds(500),
      seconds(5)));
  job.n.scheduler->Stop();
  const std::vector<RunRecord> history = History(coord_, "long");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].run_id, LongFirstRun::At(10).RunId());
  EXPECT_EQ(history[0].outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(history[1].run_id, LongFirstRun::At(20).RunId());
  EXPECT_EQ(history[1].outcome, RunOutcome::kSucceeded) << "it waited, then ran";
  EXPECT_GE(history[1].started_at, history[0].finished_at);
  EXPECT_EQ(history[2].run_id, LongFirstRun::At(30).RunId());
  EXPECT_EQ(history[2].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(history[2].skip_reason, "overlap");
}

// overlap = buffer_all: each fire that came due waits, and they run one after another, in order.
TEST_F(SchedulerTest, BufferAllRunsEachWaitingFireInOrder) {
  BusyCounter busy(coord_);
  LongFirstRun job(exec_, busy, clock_, OverlapPolicy::kBufferAll);
  AdvanceTo(clock_, kStart + seconds(10));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  for (int s : {20, 30, 40}) {
    AdvanceTo(clock_, kStart + seconds(s));
    ASSERT_TRUE(busy.AwaitBusy(LongFirstRun::At(s))) << s;
  }
  EXPECT_EQ(exec_.started(), 1);
  exec_.Release();
  ASSERT_TRUE(AdvanceUntil(
      clock_, [&](milliseconds t) { return exec_.AwaitFinished(4, t); }, milliseconds(500),
      seconds(8)));
  job.n.scheduler->Stop();
  EXPECT_EQ(job.n.observer.Count(Kind::kSkipped), 0);
  std::vector<std::string> order;
  for (const RecordedAttempt& a : exec_.attempts()) order.push_back(a.run_id);
  std::vector<std::string> want;
  for (int s : {10, 20, 30, 40}) want.push_back(LongFirstRun::At(s).RunId());
  order.resize(std::min(order.size(), want.size()));
  EXPECT_EQ(order, want) << "in the order they came due";
  const std::vector<RunRecord> history = History(coord_, "long");
  for (size_t i = 1; i < std::min<size_t>(history.size(), 4); ++i) {
    EXPECT_EQ(history[i].outcome, RunOutcome::kSucceeded) << i;
    EXPECT_GE(history[i].started_at, history[i - 1].finished_at) << i;
  }
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

// A timer names its job by slot and generation (JobTable::AtLocked): a removed job's timer, still
// queued, must not fire the job that took its slot, here a disabled one.
TEST_F(SchedulerTest, ARemovedJobsTimerDoesNotFireTheJobInItsPlace) {
  Node n("node-a", coord_, exec_, clock_);
  ASSERT_TRUE(n.scheduler->Start().ok());
  ASSERT_TRUE(n.scheduler->AddJob(Job("first", "0 0 * * * *")).ok());
  ASSERT_TRUE(n.scheduler->RemoveJob("first").ok());
  JobSpec off = Job("second", "0 0 * * * *");
  off.enabled = false;
  ASSERT_TRUE(n.scheduler->AddJob(off).ok());
  ASSERT_TRUE(n.scheduler->AddJob(Job("witness", "0 0 * * * *")).ok());
  for (int hour = 1; hour <= 2; ++hour) {
    AdvanceTo(clock_, kStart + minutes(60 * hour));
    ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, hour)) << "hour " << hour;
  }
  n.scheduler->Stop();
  std::vector<std::string> ran;
  for (const RecordedAttempt& a : exec_.attempts()) ran.push_back(a.job_id);
  EXPECT_EQ(ran, (std::vector<std::string>{"witness", "witness"}));
}

// A run counts itself on its job's entry through the slot it started with (JobTable::
// AdjustRunning), checked against the job's id: the job that took the slot meanwhile is not
// counted.
TEST_F(SchedulerTest, ARunDoesNotCountOnTheJobThatTookItsJobsSlot) {
  Node n("node-a", coord_, exec_, clock_);
  exec_.SetBehavior([&](const JobSpec&, const RunContext& ctx) {
    exec_.WaitForStopOrRelease(ctx);
    return ExecResult{};
  });
  ASSERT_TRUE(n.scheduler->Start().ok());
  ASSERT_TRUE(n.scheduler->AddJob(Job("first", "0 0 * * * *")).ok());
  AdvanceTo(clock_, kStart + minutes(60));
  ASSERT_TRUE(exec_.AwaitStarted(1));
  EXPECT_EQ(n.scheduler->GetJob("first").value().running, 1);
  ASSERT_TRUE(n.scheduler->RemoveJob("first").ok());
  ASSERT_TRUE(n.scheduler->AddJob(Job("second", "0 0 * * * *")).ok());
  exec_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(1));
  n.scheduler->Stop();  // (the run ends once its report is in)
  EXPECT_EQ(n.scheduler->GetJob("second").value().running, 0);
}

}  // namespace
}  // namespace gnomon::scheduler_test

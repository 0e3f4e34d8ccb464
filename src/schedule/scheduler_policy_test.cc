// Scheduler policies, driven by FakeClock: the breaker, misfires, lost runs, self-fencing, graceful
// stop, claim ahead, overload, report batching, pause and trigger, shards, DST, reloads.
#include "gnomon/scheduler.h"
#include "src/schedule/scheduler_test_util.h"

namespace gnomon::scheduler_test {
namespace {

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
    ASSERT_NO_FATAL_FAILURE(RunFirstFireAndStop(coord, exec, clock, j));
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
  // The engine asks a job's route once per claim and once as it queues the job's final report
  // (RunReporter::Queue).
  std::string ClaimRoute(const std::string& job_id) const override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++routes;
    }
    routed.notify_all();
    return ForwardingCoordinator::ClaimRoute(job_id);
  }
  // Waits (real time, up to 10 s) until the route was asked `n` times.
  bool AwaitRoutes(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return routed.wait_for(lock, std::chrono::seconds(10), [&] { return routes >= n; });
  }
  std::vector<size_t> Sizes() {
    std::lock_guard<std::mutex> lock(mu);
    return sizes;
  }
  Gate gate{/*first_only=*/true};
  mutable std::mutex mu;
  mutable std::condition_variable routed;
  mutable int routes = 0;
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
  ASSERT_TRUE(gated.AwaitRoutes(20));    // and its final report is queued
  gated.gate.Open();
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 10));
  n.scheduler->Stop();
  // The first call carries the reports queued when the drain started (1 to 10); those of the
  // runs that ended while it was out go in the next (one more, should the last of them be pushed
  // only just after the drain found the queue empty: its route is asked before the push).
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

// A backlog of final reports (more than a batch waits while a report call is out, as after the
// backend stalled) gets another drain: a second call goes out while the first is still held, and
// each report is sent once.
TEST_F(SchedulerTest, ABacklogOfFinalReportsIsSentByMoreThanOneCallAtOnce) {
  constexpr int kJobs = 300;  // over two batches
  GatedReports gated(coord_);
  Node n("a", gated, exec_, clock_);
  for (int k = 0; k < kJobs; ++k) {
    ASSERT_TRUE(n.scheduler->AddJob(Job("j" + std::to_string(k), "0 * * * * *")).ok());
  }
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, kStart + seconds(60));
  ASSERT_TRUE(gated.gate.AwaitCall());      // the first report call is out, and held
  ASSERT_TRUE(exec_.AwaitFinished(kJobs));  // every run has ended
  EXPECT_TRUE(gated.gate.AwaitCalls(2)) << "the backlog waited for the held call";
  gated.gate.Open();
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, kJobs));
  n.scheduler->Stop();
  size_t total = 0;
  for (size_t k : gated.Sizes()) {
    total += k;
    EXPECT_LE(k, 128u);
  }
  EXPECT_EQ(total, static_cast<size_t>(kJobs));
  for (int k = 0; k < kJobs; k += 37) {
    const std::vector<RunRecord> runs = History(coord_, "j" + std::to_string(k));
    ASSERT_EQ(runs.size(), 1u) << k;
    EXPECT_EQ(runs[0].outcome, RunOutcome::kSucceeded) << k;
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
}  // namespace gnomon::scheduler_test

// Scheduler against a misbehaving backend (ForwardingCoordinator), driven by FakeClock:
// retention, shared pause state, hanging renewals, a hanging part of the backend, failed skip
// records, outages, failed reports.
#include "gnomon/scheduler.h"
#include "src/schedule/scheduler_test_util.h"

namespace gnomon::scheduler_test {
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

class CountingPrunes : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override {
    ++prunes;
    return ForwardingCoordinator::PruneHistory(job_id, keep_last, max_age);
  }
  // The default: PruneHistory of each (counted above).
  std::vector<Status> PruneHistoryMany(const std::vector<PruneRequest>& reqs) override {
    ++batches;
    return Coordinator::PruneHistoryMany(reqs);
  }
  std::atomic<int> prunes{0};
  std::atomic<int> batches{0};
};

// The hourly sweep over every job (max_age of jobs that stopped running) is spread over the hour:
// with 5-s passes, 1/720 of the jobs a pass, not all of them in the first minute; a pass's
// prunes go to the backend together (PruneHistoryMany: one script call a batch on Redis).
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
    EXPECT_EQ(coord.batches, pass) << "pass " << pass << ": one batch";
    clock.Advance(seconds(5));
  }
  n.scheduler->Stop();
}

// Job-state reads answer late once armed: the read is made, then its answer held until released
// (a slow backend answering a read from before a change).
// Counts the job states read (AwaitRead); the first `fail_first` reads fail (Unavailable).
class LateStateReads : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& ids) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (armed_before_) {  // held before the read: its answer is the state when released
        armed_before_ = false;
        holding_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !holding_; });
      }
      if (fail_first > 0) {
        --fail_first;
        ++failed_;
        cv_.notify_all();
        return UnavailableError("state read failed (test)");
      }
    }
    Result<std::vector<JobState>> answer = ForwardingCoordinator::GetJobStates(ids);
    std::unique_lock<std::mutex> lock(mu_);
    read_ += ids.size();
    cv_.notify_all();
    if (armed_) {
      armed_ = false;
      holding_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !holding_; });
    }
    return answer;
  }
  // Holds the next read's answer (Arm) or the read itself (ArmBefore) until Release.
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  void ArmBefore() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_before_ = true;
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
  // Waits until `n` job states were read (or `failed` reads failed).
  bool AwaitRead(size_t n, int failed = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return read_ >= n && failed_ >= failed; });
  }
  size_t read() {
    std::lock_guard<std::mutex> lock(mu_);
    return read_;
  }
  int fail_first = 0;  // set before Start

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool armed_before_ = false;
  bool holding_ = false;
  size_t read_ = 0;
  int failed_ = 0;
};

TEST(SchedulerSharedStateTest, PauseOnAnotherNodeIsSeenWithinThePollInterval) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  LateStateReads coord(backend);
  RecordingExecutor exec;
  Node a("a", coord, exec, clock);
  ASSERT_TRUE(a.scheduler->AddJob(Job("shared", "0 0 1 1 *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(coord.AwaitRead(1));  // the start-up catch-up's read
  EXPECT_FALSE(a.scheduler->GetJob("shared")->paused);
  // Another node pauses the job in the backend; the next poll (500 ms later) sees it, long
  // before the next housekeeping pass (5 s).
  ASSERT_TRUE(backend.SetPaused("shared", true, "api").ok());
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));
  EXPECT_TRUE(a.scheduler->GetJob("shared")->paused);
  EXPECT_EQ(a.scheduler->GetJob("shared")->pause_reason, "api");
  a.scheduler->Stop();
}

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
  ASSERT_TRUE(coord.AwaitRead(2));  // the start-up catch-up's read
  // A change elsewhere makes the next poll read every job's state; its answer ("shared" not
  // paused) is held while this node pauses "shared".
  coord.Arm();
  ASSERT_TRUE(backend.SetPaused("other", true, "elsewhere").ok());
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(coord.AwaitHeld());
  ASSERT_TRUE(a.scheduler->Pause("shared", "api").ok());
  coord.Release();
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));
  EXPECT_TRUE(a.scheduler->GetJob("shared")->paused);
  EXPECT_EQ(a.scheduler->GetJob("shared")->pause_reason, "api");
  EXPECT_TRUE(a.scheduler->GetJob("other")->paused);
  a.scheduler->Stop();
}

// A starting node reads each job's state once: its start-up catch-up reads them after it read the
// jobs version, so the state polls read them again only once the version moves on.
TEST(SchedulerSharedStateTest, AStartReadsEachJobsStateOnce) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  LateStateReads coord(backend);
  RecordingExecutor exec;
  Node a("a", coord, exec, clock);
  for (int k = 0; k < 1000; ++k) {  // two catch-up reads of 512 at most
    ASSERT_TRUE(a.scheduler->AddJob(Job("j" + std::to_string(k), "0 0 1 1 *")).ok());
  }
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(coord.AwaitRead(1000));
  for (int poll = 0; poll < 3; ++poll) {
    clock.Advance(milliseconds(500));
    a.observer.Await(Kind::kError, 1, {}, milliseconds(100));  // a bounded real wait
  }
  EXPECT_EQ(coord.read(), 1000u) << "the polls read no state while the version stays";
  EXPECT_EQ(a.observer.Count(Kind::kJobsReloaded), 0);
  ASSERT_TRUE(backend.SetPaused("j7", true, "elsewhere").ok());
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));
  EXPECT_EQ(coord.read(), 2000u);
  EXPECT_TRUE(a.scheduler->GetJob("j7")->paused);
  a.scheduler->Stop();
}

// A start-up state read that failed is made up by the next state poll, though the jobs version
// did not move: a job paused before the node started is seen paused.
TEST(SchedulerSharedStateTest, AFailedStartUpStateReadIsMadeUpByTheNextPoll) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  LateStateReads coord(backend);
  coord.fail_first = 1;
  RecordingExecutor exec;
  Node a("a", coord, exec, clock);
  ASSERT_TRUE(backend.SetPaused("held", true, "api").ok());
  ASSERT_TRUE(a.scheduler->AddJob(Job("held", "0 0 1 1 *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(coord.AwaitRead(0, 1));  // the start-up catch-up's read failed
  clock.Advance(milliseconds(500));
  ASSERT_TRUE(a.observer.Await(Kind::kJobsReloaded, 1));
  EXPECT_TRUE(a.scheduler->GetJob("held")->paused);
  EXPECT_EQ(a.scheduler->GetJob("held")->pause_reason, "api");
  a.scheduler->Stop();
}

// The fleet was down from :01:30 to :10:50: node "b" starts with nine fires of an every-minute job
// missed (:02 to :10). (overlap = allow: the catch-up of :10 and the on-time :11 both run, in
// either order.)
class StartAfterAnOutage : public ::testing::Test {
 protected:
  static JobSpec Minutely() {
    JobSpec j = Job("m", "0 * * * * *");
    j.overlap = OverlapPolicy::kAllow;
    return j;
  }
  void RunFirstFire() {
    RecordingExecutor first;
    ASSERT_NO_FATAL_FAILURE(RunFirstFireAndStop(backend_, first, clock_, Minutely()));
    clock_.Advance(minutes(9) + seconds(50));
  }
  // b's records of the job: each fire from :01 to :11 once; the latest missed (:10) and the
  // on-time :11 ran, the eight before :10 were recorded skipped (misfire = once).
  void ExpectEveryFireHandledOnce() {
    const auto history = History(backend_, "m");
    std::map<Instant, int> records;
    for (const RunRecord& r : history) ++records[r.scheduled_at];
    for (int m = 1; m <= 11; ++m) {
      EXPECT_EQ(records[kStart + minutes(m)], 1) << "the fire at :" << m;
    }
    EXPECT_EQ(history.size(), 11u);
    std::set<Instant> ran;
    for (const auto& a : exec_.attempts()) ran.insert(a.scheduled_at);
    EXPECT_EQ(ran, (std::set<Instant>{kStart + minutes(10), kStart + minutes(11)}));
  }
  FakeClock clock_{kBoot};
  MemoryCoordinator backend_{clock_};
  LateStateReads coord_{backend_};
  RecordingExecutor exec_;
};

// The start-up catch-up's read is answered only after the next on-time fire is due: that fire
// waits for it, so the backend's last_scheduled it reads is still the fire before the outage
// (claimed first, the on-time fire would have hidden the nine missed ones from it).
TEST_F(StartAfterAnOutage, AJobsFirstClaimWaitsForItsCatchUpRead) {
  ASSERT_NO_FATAL_FAILURE(RunFirstFire());
  Node b("b", coord_, exec_, clock_);
  ASSERT_TRUE(b.scheduler->AddJob(Minutely()).ok());
  coord_.ArmBefore();
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(coord_.AwaitHeld());
  AdvanceTo(clock_, kStart + minutes(11));  // the on-time fire is due while the read is held
  EXPECT_FALSE(b.observer.Await(Kind::kClaimed, 1, {}, milliseconds(200)))
      << "claimed before its catch-up read";  // (a bounded real wait)
  coord_.Release();
  ASSERT_TRUE(exec_.AwaitFinished(2));
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 8, "misfire"));
  b.scheduler->Stop();
  ExpectEveryFireHandledOnce();
}

// The start-up catch-up's read fails (the backend is unreachable as b starts): it is made again by
// the next housekeeping pass, and the missed fires are caught up then.
TEST_F(StartAfterAnOutage, AFailedCatchUpReadIsMadeAgainByTheNextPass) {
  ASSERT_NO_FATAL_FAILURE(RunFirstFire());
  coord_.fail_first = 1;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(1);
  Node b("b", coord_, exec_, clock_, opts);
  ASSERT_TRUE(b.scheduler->AddJob(Minutely()).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(coord_.AwaitRead(0, 1));             // the catch-up's read failed
  ASSERT_TRUE(b.observer.Await(Kind::kError, 1));  // the operator is told
  for (const SchedulerEvent& ev : b.observer.events()) {
    if (ev.kind == Kind::kError) {
      EXPECT_EQ(
          ev.detail.rfind("catch-up read (1 jobs; made again at the next housekeeping pass)", 0),
          0u)
          << ev.detail;
    }
  }
  // A pass a second, up to :10:59 (a pass still running when the next is due skips it).
  while (clock_.Now() < kStart + minutes(10) + seconds(59) &&
         !b.observer.Await(Kind::kRunFinished, 1, {}, milliseconds(50))) {  // a bounded real wait
    clock_.Advance(seconds(1));
  }
  ASSERT_TRUE(exec_.AwaitFinished(1));  // :10, the latest missed fire, before :11 came
  EXPECT_LT(clock_.Now(), kStart + minutes(11));
  AdvanceTo(clock_, kStart + minutes(11));
  ASSERT_TRUE(exec_.AwaitFinished(2));
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 8, "misfire"));
  b.scheduler->Stop();
  ExpectEveryFireHandledOnce();
}

// Two parts of the backend, as the primaries of a Redis Cluster: job "n" is answered by part b,
// which answers no state read and no claim while `b_down`; every other job by part a.
class PartBDown : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  std::string ClaimRoute(const std::string& job_id) const override {
    return job_id == "n" ? "b" : "a";
  }
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& ids) override {
    if (b_down && std::find(ids.begin(), ids.end(), "n") != ids.end()) {
      return UnavailableError("part b down (test)");
    }
    return ForwardingCoordinator::GetJobStates(ids);
  }
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    if (b_down && req.fire.job_id == "n") return UnavailableError("part b down (test)");
    return ForwardingCoordinator::Claim(req);
  }
  std::atomic<bool> b_down{true};
};

// Node b starts after the outage while part b of the backend is down: the start-up read of both
// jobs fails, is made again per part at once, and job m (part a) is caught up and fires on time
// while part b is down; job n waits, and is caught up once part b answers.
TEST_F(StartAfterAnOutage, APartOfTheBackendThatCannotAnswerHoldsBackOnlyItsOwnJobs) {
  ASSERT_NO_FATAL_FAILURE(RunFirstFire());
  JobSpec n = Minutely();
  n.id = "n";
  ASSERT_TRUE(backend_.RecordSkipped(FireKey{"n", kStart + minutes(1)}, "a", "misfire").ok());
  PartBDown coord(backend_);
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(1);
  Node b("b", coord, exec_, clock_, opts);
  ASSERT_TRUE(b.scheduler->AddJob(Minutely()).ok());
  ASSERT_TRUE(b.scheduler->AddJob(n).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(exec_.AwaitFinished(1));  // m's :10, the latest missed fire, with part b down
  AdvanceTo(clock_, kStart + minutes(11));
  ASSERT_TRUE(exec_.AwaitFinished(2));                   // m's :11, on time
  AdvanceTo(clock_, kStart + minutes(11) + seconds(5));  // n's :11 is a missed fire too now
  for (const auto& a : exec_.attempts()) EXPECT_EQ(a.job_id, "m");
  coord.b_down = false;
  // A pass a second reads n's state again.
  while (clock_.Now() < kStart + minutes(11) + seconds(30) &&
         !b.observer.Await(Kind::kRunFinished, 3, {}, milliseconds(50))) {  // a bounded real wait
    clock_.Advance(seconds(1));
  }
  ASSERT_TRUE(exec_.AwaitFinished(3));
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 8 + 9, "misfire"));
  b.scheduler->Stop();
  ExpectEveryFireHandledOnce();
  std::map<Instant, int> records;
  for (const RunRecord& r : History(backend_, "n")) ++records[r.scheduled_at];
  for (int m = 1; m <= 11; ++m) EXPECT_EQ(records[kStart + minutes(m)], 1) << "n's fire at :" << m;
  EXPECT_EQ(exec_.attempts().back().job_id, "n");
  EXPECT_EQ(exec_.attempts().back().scheduled_at, kStart + minutes(11)) << "n's latest missed";
}

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

// Pruning that hangs on the backend (a pass over a large job set's history outlasting the
// interval); heartbeats are counted.
class HangingPrunes : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override {
    gate.Pass();
    return ForwardingCoordinator::PruneHistory(job_id, keep_last, max_age);
  }
  Status Heartbeat(const NodeInfo& node, Duration ttl) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++heartbeats_;
    }
    cv_.notify_all();
    return ForwardingCoordinator::Heartbeat(node, ttl);
  }
  int heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }
  // Waits (real time, up to `limit`) until `n` heartbeats were sent.
  bool AwaitHeartbeats(int n, milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return heartbeats_ >= n; });
  }
  Gate gate;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int heartbeats_ = 0;
};

// A housekeeping pass stuck past its interval does not stop the heartbeat: the node stays in the
// live set (a heartbeat lives 3 intervals), so its peers do not take its fires over.
TEST(SchedulerHousekeepingTest, AStuckPassDoesNotStopTheHeartbeat) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  HangingPrunes coord(backend);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node n("a", coord, exec, clock, opts);
  ASSERT_TRUE(n.scheduler->AddJob(Job("yearly", "0 0 1 1 *")).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  // The first pass's history sweep (a slice of the jobs each pass) hangs in PruneHistory.
  if (!coord.gate.AwaitCall()) {
    coord.gate.Open();
    FAIL() << "the first pass did not prune";
  }
  const int first = coord.heartbeats();
  EXPECT_GE(first, 1);
  // 20 s (beyond a heartbeat's 15 s life) with that pass still stuck, in 1 s steps, each
  // given a moment (real time) for the engine to act on it.
  for (int s = 0; s < 20; ++s) {
    clock.Advance(seconds(1));
    (void)coord.AwaitHeartbeats(first + s / 5 + 1, milliseconds(50));
  }
  const int beats = coord.heartbeats() - first;
  Result<std::vector<NodeInfo>> live = backend.ListNodes();
  coord.gate.Open();  // before any check can end the test: the stuck pass holds a worker
  EXPECT_GE(beats, 3) << "heartbeats in the 20 s of the stuck pass";
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u) << "the node left the live set";
  EXPECT_EQ((*live)[0].node_id, "a");
  n.scheduler->Stop();
}

// One part of the backend (ClaimStore::ClaimRoute: a Redis Cluster primary) stops answering:
// the claims of job "stuck-claim" and the reports of job "stuck-report" hang there until
// released. The other parts' claims and reports are sent apart, so job "ok" on a part of its own
// is claimed, run and recorded meanwhile.
class HangingPart : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  std::string ClaimRoute(const std::string& job_id) const override { return "part-" + job_id; }
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    if (req.fire.job_id == "stuck-claim") claims.Pass();
    return ForwardingCoordinator::Claim(req);
  }
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override {
    if (claim.fire.job_id == "stuck-report") reports.Pass();
    return ForwardingCoordinator::Report(claim, record, final);
  }
  Gate claims;
  Gate reports;
};

TEST(SchedulerRouteTest, APartThatHangsHoldsBackOnlyItsOwnJobsFires) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  HangingPart coord(backend);
  RecordingExecutor exec;
  Node n("a", coord, exec, clock, {});
  for (const char* id : {"stuck-claim", "stuck-report", "ok"}) {
    ASSERT_TRUE(n.scheduler->AddJob(Job(id, "0 * * * * *")).ok());
  }
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock, kStart + seconds(60));
  const bool claim_held = coord.claims.AwaitCall();
  const bool report_held = coord.reports.AwaitCall();
  const std::string ok_run = "ok@" + std::to_string((kStart + seconds(60)).unix_millis());
  const bool ok_recorded = n.observer.AwaitRun(Kind::kRunFinished, ok_run);
  coord.claims.Open();
  coord.reports.Open();
  EXPECT_TRUE(claim_held);
  EXPECT_TRUE(report_held);
  EXPECT_TRUE(ok_recorded) << "job ok waited for another part's claim or report";
  ASSERT_TRUE(n.observer.Await(Kind::kRunFinished, 3));
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
  ASSERT_NO_FATAL_FAILURE(RunFirstFireAndStop(coord, exec, clock, Job("m", "0 * * * * *")));
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

// A backend whose closed fire markers expire `retention` after the fire's instant, as
// RedisCoordinator's do (RedisOptions::fire_retention): it refuses a claim by schedule of an older
// fire (kTooOld), writing nothing.
class ExpiringMarkers : public testing::ForwardingCoordinator {
 public:
  ExpiringMarkers(Coordinator& target, Duration retention)
      : ForwardingCoordinator(target), retention_(retention) {}
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    Result<Instant> now = Now();
    if (!now.ok()) return now.status();
    if (!req.cause.empty() || req.fire.scheduled_at > *now - retention_) {
      return ForwardingCoordinator::Claim(req);
    }
    ClaimOutcome out;
    out.result = ClaimOutcome::Result::kTooOld;
    out.backend_now = *now;
    ++refused;
    return out;
  }
  std::atomic<int> refused{0};

 private:
  const Duration retention_;
};

// A catch-up that reaches further back than the backend keeps fire markers (misfire = all,
// catchup_window 10 min, markers kept 5 min): the fires older than the markers are neither run
// nor recorded, each with a `skipped` event "too-old" (no record); the newer ones run, once each.
TEST(SchedulerMisfireTest, FiresOlderThanTheBackendKeepsMarkersAreNeitherRunNorRecorded) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  ExpiringMarkers coord(backend, minutes(5));
  RecordingExecutor exec;
  JobSpec j = Job("m", "0 * * * * *");
  j.misfire = MisfirePolicy::kAll;
  j.catchup_window = minutes(10);
  ASSERT_NO_FATAL_FAILURE(RunFirstFireAndStop(coord, exec, clock, j));
  clock.Advance(minutes(10) + seconds(30));  // now kStart + 11m30s; fires :02 to :11 missed
  Node b("b", coord, exec, clock);
  ASSERT_TRUE(b.scheduler->AddJob(j).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  // :02 to :06 are at least 5 min old: refused. :07 to :11 run.
  ASSERT_TRUE(exec.AwaitFinished(6));
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 5, "too-old"));
  b.scheduler->Stop();
  EXPECT_EQ(coord.refused.load(), 5);
  std::set<Instant> ran;
  for (const auto& a : exec.attempts()) ran.insert(a.scheduled_at);
  std::set<Instant> expected{kStart + minutes(1)};
  for (int m = 7; m <= 11; ++m) expected.insert(kStart + minutes(m));
  EXPECT_EQ(ran, expected);
  EXPECT_EQ(exec.attempts().size(), 6u) << "each once";
  int too_old = 0;
  for (const SchedulerEvent& e : b.observer.events()) {
    if (e.kind != Kind::kSkipped) continue;
    EXPECT_EQ(e.detail, "too-old") << e.run_id;
    EXPECT_LE(e.scheduled_at, kStart + minutes(6)) << e.run_id;
    ++too_old;
  }
  EXPECT_EQ(too_old, 5);
  EXPECT_EQ(b.observer.Count(Kind::kError), 0);
  const auto history = History(backend, "m");
  EXPECT_EQ(history.size(), 6u) << "no record for a refused fire";
  for (const RunRecord& r : history) EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.run_id;
}

// A backfill over a fire whose history the backend pruned (memory, SQLite and etcd drop its
// marker with it): the backend reads the fire as unrecorded, so the backfill lists it, but the
// fire cannot be told from one that never ran, so its claim is refused as too old: it is neither
// run a second time nor recorded, and a `skipped` event "too-old" says so.
TEST(SchedulerMisfireTest, ABackfillDoesNotRunAFireWhoseHistoryWasPruned) {
  FakeClock clock(kBoot);
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  JobSpec j = Job("bf", "0 * * * * *");
  j.misfire = MisfirePolicy::kSkip;  // the start's catch-up runs nothing
  ASSERT_NO_FATAL_FAILURE(RunFirstFireAndStop(coord, exec, clock, j));
  ASSERT_EQ(exec.attempts().size(), 1u);
  const FireKey ran{"bf", exec.attempts()[0].scheduled_at};
  clock.Advance(std::chrono::hours(2) + seconds(30));  // between two fires: none is due
  ASSERT_TRUE(coord.PruneHistory("bf", 1, std::chrono::hours(1)).ok());
  ASSERT_EQ(coord.FiresRecorded({ran}).value(), std::vector<bool>{false}) << "pruned";
  Node b("b", coord, exec, clock);
  ASSERT_TRUE(b.scheduler->AddJob(j).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  Result<BackfillPlan> plan = b.scheduler->Backfill(
      "bf", ran.scheduled_at, ran.scheduled_at + seconds(1), 1, 100, "backfill by ops");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->run_ids, std::vector<std::string>{ran.RunId()});
  ASSERT_TRUE(b.observer.Await(Kind::kSkipped, 1, "too-old"));
  b.scheduler->Stop();
  int runs_of_it = 0;
  for (const auto& a : exec.attempts()) runs_of_it += a.scheduled_at == ran.scheduled_at;
  EXPECT_EQ(runs_of_it, 1) << "not run a second time";
  EXPECT_EQ(exec.attempts().size(), 1u) << "nor anything else";
  EXPECT_EQ(coord.FiresRecorded({ran}).value(), std::vector<bool>{false}) << "nor recorded";
  int too_old = 0;
  for (const SchedulerEvent& e : b.observer.events()) {
    if (e.kind == Kind::kSkipped && e.detail == "too-old") {
      EXPECT_EQ(e.run_id, ran.RunId());
      ++too_old;
    }
  }
  EXPECT_EQ(too_old, 1);
}

// Moves `clock` to `t` in steps of `step`, letting n's engine react after each.
void StepTo(FakeClock& clock, Node& n, Instant t, Duration step) {
  while (clock.Now() < t) {
    clock.Advance(std::min<Duration>(step, t - clock.Now()));
    n.observer.Await(Kind::kClaimed, 1000, {}, milliseconds(20));  // a bounded real wait
  }
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
  auto step_to = [&](Instant t) { StepTo(clock, a, t, seconds(1)); };
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

// A backend whose parts can move (ClaimStore::AddRoutesListener), as a Redis Cluster's slot map
// moves a failed primary's slots to its replica: Move() calls the listener as the store would.
class MovingRoutes : public Outage {
 public:
  using Outage::Outage;
  int AddRoutesListener(std::function<void()> listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = std::move(listener);
    return ++handles_;
  }
  void RemoveRoutesListener(int handle) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == handles_) listener_ = nullptr;
  }
  void Move() {
    std::lock_guard<std::mutex> lock(mu_);
    if (listener_) listener_();
  }
  bool Listened() {
    std::lock_guard<std::mutex> lock(mu_);
    return listener_ != nullptr;
  }

 private:
  std::mutex mu_;
  std::function<void()> listener_;
  int handles_ = 0;
};

// A claim that failed because its part of the backend was down is made again as soon as the
// backend says its routes moved (a failover), on time, not at the next housekeeping pass: the
// fake clock stands still inside the fire's claim grace, so nothing else could claim it.
TEST(SchedulerOutageTest, AFailedClaimIsMadeAgainWhenTheBackendsRoutesMove) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  MovingRoutes coord(backend);
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = minutes(10);  // the first pass runs at start, the next much later
  Node a("a", coord, exec, clock, opts);
  ASSERT_TRUE(a.scheduler->AddJob(Job("t", "*/10 * * * * *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(coord.Listened());
  StepTo(clock, a, kStart + seconds(10), seconds(1));
  ASSERT_TRUE(exec.AwaitFinished(1));
  coord.down = true;
  AdvanceTo(clock, kStart + seconds(20) + milliseconds(300));
  ASSERT_TRUE(a.observer.Await(Kind::kError, 1, {}, seconds(10)));  // :20's claim failed
  coord.down = false;
  // The failed claim is kept just after its error event: move until it is made again.
  for (int i = 0; i < 100 && !exec.AwaitStarted(2, milliseconds(100)); ++i) coord.Move();
  ASSERT_TRUE(exec.AwaitFinished(2)) << "made again when the routes moved";
  EXPECT_EQ(clock.Now(), kStart + seconds(20) + milliseconds(300)) << "the clock stood still";
  a.scheduler->Stop();
  EXPECT_FALSE(coord.Listened()) << "the listener goes with the stop";
  const auto attempts = exec.attempts();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[1].scheduled_at, kStart + seconds(20));
  int catch_ups = 0;
  for (const SchedulerEvent& e : a.observer.events()) catch_ups += e.catch_up;
  EXPECT_EQ(catch_ups, 0) << "claimed as on time, inside its claim grace";
}

// A peer's claim of one fire (job "t") that its node may still withdraw, as a claim whose batch
// too few replicas acknowledged (wait_replicas) is withdrawn: while `pending`, the fire reads as
// claimed on time by "b" and running; withdrawn, it reads as never claimed.
class PendingPeerClaim : public Outage {
 public:
  PendingPeerClaim(Coordinator& target, Instant fire) : Outage(target), fire_(fire) {}
  bool ClaimsMayBeWithdrawn() const override { return withdrawable; }
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override {
    if (!pending || run_id != FireKey{"t", fire_, 0, 1}.RunId()) return Outage::GetRun(run_id);
    RunRecord r;
    r.run_id = run_id;
    r.job_id = "t";
    r.scheduled_at = fire_;
    r.fencing_token = 7;
    r.node_id = "b";
    r.started_at = fire_;
    return std::vector<RunRecord>{r};
  }
  std::atomic<bool> pending{true};
  bool withdrawable = true;  // (as RedisCoordinator with wait_replicas)

 private:
  const Instant fire_;
};

// misfire = once after an outage whose latest fire (:30) a peer claimed on time, but that claim
// is withdrawn later (chaos C1 under wait_replicas): the owner waits for the claim to settle
// rather than take :30 as run, and once it is withdrawn runs :30 as the outage's catch-up.
TEST(SchedulerMisfireTest, APeersClaimThatIsWithdrawnLeavesTheFireToTheCatchUp) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  PendingPeerClaim coord(backend, kStart + seconds(30));
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node a("a", coord, exec, clock, opts);
  ASSERT_TRUE(a.scheduler->AddJob(Job("t", "*/10 * * * * *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) { StepTo(clock, a, t, seconds(1)); };
  step_to(kStart + seconds(10));
  ASSERT_TRUE(exec.AwaitFinished(1));
  coord.down = true;  // :20 and :30 cannot be claimed; a peer's claim of :30 is pending
  step_to(kStart + seconds(37));
  coord.down = false;
  step_to(kStart + seconds(40));
  ASSERT_TRUE(exec.AwaitFinished(2));  // :40 on time
  step_to(kStart + seconds(52));       // passes at :45 and :50 see the peer's claim pending
  ASSERT_TRUE(exec.AwaitFinished(3));  // :50 on time
  EXPECT_EQ(exec.attempts().size(), 3u) << "no catch-up while the peer's claim may stand";
  EXPECT_EQ(a.observer.Count(Kind::kSkipped, "misfire"), 0) << "the batch is not decided yet";
  coord.pending = false;          // withdrawn
  step_to(kStart + seconds(56));  // the pass at :55
  ASSERT_TRUE(exec.AwaitFinished(4));
  ASSERT_TRUE(a.observer.Await(Kind::kSkipped, 1, "misfire"));
  a.scheduler->Stop();
  const auto attempts = exec.attempts();
  ASSERT_EQ(attempts.size(), 4u);
  EXPECT_EQ(attempts[3].scheduled_at, kStart + seconds(30)) << "the withdrawn fire, as catch-up";
  const auto history = History(backend, "t");
  ASSERT_EQ(history.size(), 5u) << "every fire has one record (:10 to :50)";
  for (const RunRecord& r : history) {
    EXPECT_EQ(r.outcome == RunOutcome::kSkipped, r.scheduled_at == kStart + seconds(20))
        << r.run_id;
  }
}

// The same peer's claim that stays (its run goes on): once it is lease_ttl old it can no longer
// be withdrawn, so :30 counts as claimed on time and the next older fire, :20, is the outage's
// latest missed one: it runs as the catch-up, and :30 does not run again.
TEST(SchedulerMisfireTest, APeersClaimThatOutlivesItsLeaseCountsAsOnTime) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  PendingPeerClaim coord(backend, kStart + seconds(30));
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  opts.lease_ttl = seconds(20);
  Node a("a", coord, exec, clock, opts);
  ASSERT_TRUE(a.scheduler->AddJob(Job("t", "*/10 * * * * *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) { StepTo(clock, a, t, seconds(1)); };
  auto ran = [&](Instant fire) {
    int n = 0;
    for (const auto& at : exec.attempts()) n += at.scheduled_at == fire;
    return n;
  };
  step_to(kStart + seconds(10));
  ASSERT_TRUE(exec.AwaitFinished(1));
  coord.down = true;
  step_to(kStart + seconds(37));
  coord.down = false;
  step_to(kStart + seconds(47));
  ASSERT_TRUE(exec.AwaitFinished(2));  // :40 on time
  EXPECT_EQ(ran(kStart + seconds(20)), 0) << "no catch-up while the peer's claim may stand";
  step_to(kStart + seconds(56));       // the pass at :55, 25 s after the claim (lease_ttl + window)
  ASSERT_TRUE(exec.AwaitFinished(4));  // :50 on time, and the catch-up
  a.scheduler->Stop();
  EXPECT_EQ(ran(kStart + seconds(20)), 1) << "the latest fire missed";
  EXPECT_EQ(ran(kStart + seconds(30)), 0) << "the peer's fire ran again";
  EXPECT_EQ(a.observer.Count(Kind::kSkipped, "misfire"), 0);
}

// The owner's claim of :30 fails; its on-time retry finds :30 claimed by a peer whose claim is
// withdrawn afterwards (under wait_replicas, too few replicas acknowledged it). The fire stays
// with the owner's misfire policy, which runs it as a catch-up once the claim is gone, rather
// than leaving it to a claim that never ran.
class RetryMeetsPendingClaim : public PendingPeerClaim {
 public:
  using PendingPeerClaim::PendingPeerClaim;
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    if (req.fire.RunId() == FireKey{"t", kStart + seconds(30), 0, 1}.RunId()) {
      if (claims_of_30++ == 0) return UnavailableError("backend down");
      if (pending) return ClaimOutcome{};  // kAlreadyClaimed: the peer's claim
    }
    return PendingPeerClaim::Claim(req);
  }
  std::atomic<int> claims_of_30{0};
};

TEST(SchedulerMisfireTest, ARetryThatFindsAClaimLaterWithdrawnLeavesTheFireToTheCatchUp) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  RetryMeetsPendingClaim coord(backend, kStart + seconds(30));
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = milliseconds(250);
  opts.claim_ahead = Duration::zero();
  Node a("a", coord, exec, clock, opts);
  ASSERT_TRUE(a.scheduler->AddJob(Job("t", "*/10 * * * * *")).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) { StepTo(clock, a, t, milliseconds(250)); };
  const std::string run30 = FireKey{"t", kStart + seconds(30), 0, 1}.RunId();
  step_to(kStart + seconds(35));
  ASSERT_TRUE(exec.AwaitFinished(2));  // :10 and :20
  ASSERT_GE(coord.claims_of_30, 2) << "the failed claim of :30 was retried";
  ASSERT_TRUE(a.observer.AwaitRun(Kind::kClaimLost, run30)) << "and found it claimed elsewhere";
  EXPECT_EQ(exec.attempts().size(), 2u) << "no catch-up while the peer's claim may stand";
  coord.pending = false;  // withdrawn
  step_to(kStart + seconds(37));
  ASSERT_TRUE(exec.AwaitFinished(3));
  a.scheduler->Stop();
  const auto attempts = exec.attempts();
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[2].run_id, run30) << "the withdrawn fire runs";
  bool catch_up = false;
  for (const SchedulerEvent& ev : a.observer.events()) {
    catch_up |= ev.kind == Kind::kClaimed && ev.run_id == run30 && ev.catch_up;
  }
  EXPECT_TRUE(catch_up) << "as the outage's catch-up";
  const auto history = History(backend, "t");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history.back().run_id, run30);
}

// Counts claim calls, one by one (Claim) and in batches (ClaimMany), and record reads (GetRun);
// every claim fails while `down`, and a claim of job "t"'s fire at :30 answers that a peer
// claimed it while `pending` (its record reads as that peer's running first attempt).
class CountingClaims : public PendingPeerClaim {
 public:
  using PendingPeerClaim::PendingPeerClaim;
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    ++single;
    return Answer(req);
  }
  std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs) override {
    ++batches;
    std::vector<Result<ClaimOutcome>> out;
    for (const ClaimRequest& req : reqs) out.push_back(Answer(req));
    return out;
  }
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override {
    ++reads;
    return PendingPeerClaim::GetRun(run_id);
  }
  std::atomic<int> single{0}, batches{0}, reads{0};

 private:
  Result<ClaimOutcome> Answer(const ClaimRequest& req) {
    if (down) return UnavailableError("backend down");
    if (pending && req.fire.RunId() == FireKey{"t", kStart + seconds(30), 0, 1}.RunId()) {
      return ClaimOutcome{};  // kAlreadyClaimed: the peer's claim
    }
    return PendingPeerClaim::Claim(req);
  }
};

// A fleet that runs late misses one fire of many jobs at once. Each job's one missed fire is
// claimed with the others in batches (misfire = once and all alike), as on-time fires are, not
// by a record read and a claim call per fire: a late fire costs the backend what an on-time one
// does, so a fleet that fell behind can catch up.
TEST(SchedulerMisfireTest, TheOneMissedFireOfEachJobIsClaimedInBatches) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  CountingClaims coord(backend, kStart + seconds(30));
  coord.pending = false;
  RecordingExecutor exec;
  SchedulerOptions opts;
  opts.housekeeping_interval = seconds(5);
  Node a("a", coord, exec, clock, opts);
  constexpr int kJobs = 60;
  for (int k = 0; k < kJobs; ++k) {
    JobSpec j = Job("j" + std::to_string(k), "*/10 * * * * *");
    if (k % 2 == 1) j.misfire = MisfirePolicy::kAll;
    ASSERT_TRUE(a.scheduler->AddJob(j).ok());
  }
  ASSERT_TRUE(a.scheduler->Start().ok());
  auto step_to = [&](Instant t) { StepTo(clock, a, t, seconds(1)); };
  step_to(kStart + seconds(10));
  ASSERT_TRUE(exec.AwaitFinished(kJobs));
  coord.down = true;  // every job's fire at :20 cannot be claimed
  step_to(kStart + seconds(22));
  coord.down = false;
  step_to(kStart + seconds(26));  // the pass at :25 hands each job's :20 to its policy
  ASSERT_TRUE(exec.AwaitFinished(2 * kJobs));
  a.scheduler->Stop();
  EXPECT_EQ(coord.single, 0) << "no claim call of its own for any fire";
  EXPECT_EQ(coord.reads, 0) << "no record read before a catch-up's claim";
  int catch_ups = 0;
  for (const SchedulerEvent& ev : a.observer.events()) {
    catch_ups += ev.kind == Kind::kClaimed && ev.catch_up;
    if (ev.kind == Kind::kClaimed) {
      EXPECT_EQ(ev.catch_up, ev.scheduled_at == kStart + seconds(20)) << ev.run_id;
    }
  }
  EXPECT_EQ(catch_ups, kJobs);
  for (int k = 0; k < kJobs; ++k) {
    const auto history = History(backend, "j" + std::to_string(k));
    ASSERT_EQ(history.size(), 2u) << "j" << k;
    for (const RunRecord& r : history) {
      EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.run_id;
      EXPECT_EQ(r.attempt, 1) << r.run_id;
    }
  }
}

// A peer "a" whose heartbeat is live for `ttl` from now but that claims nothing (a hung node).
void AddHungPeer(MemoryCoordinator& backend, Duration ttl) {
  NodeInfo hung;
  hung.node_id = "a";
  hung.started_at = kBoot;
  ASSERT_TRUE(backend.Heartbeat(hung, ttl).ok());
}

// Options of a node beside a hung peer: takeovers after 500 ms, a pass every 5 s.
SchedulerOptions TakeoverOptions() {
  SchedulerOptions opts;
  opts.takeover_delay = milliseconds(500);
  opts.housekeeping_interval = seconds(5);
  return opts;
}

// True once `n` (started) sees `count` live nodes; a bounded real wait for its first pass.
bool AwaitLiveNodes(Node& n, size_t count) {
  for (int i = 0; i < 400 && n.scheduler->LiveNodes().size() != count; ++i) {
    n.observer.Await(Kind::kError, 1, {}, milliseconds(10));
  }
  return n.scheduler->LiveNodes().size() == count;
}

// A peer whose heartbeat is live but that claims nothing (a hung node): this node takes its
// fires over after takeover_delay, every fire due together in one claim batch rather than a
// claim call per fire.
TEST(SchedulerTakeoverTest, TheFiresTakenOverTogetherAreClaimedInOneBatch) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  CountingClaims coord(backend, kStart + seconds(30));
  coord.pending = false;
  ASSERT_NO_FATAL_FAILURE(AddHungPeer(backend, minutes(10)));
  RecordingExecutor exec;
  Node b("b", coord, exec, clock, TakeoverOptions());
  constexpr int kJobs = 40;
  int owned_by_a = 0;
  for (int k = 0; k < kJobs; ++k) {
    const std::string id = "j" + std::to_string(k);
    ASSERT_TRUE(b.scheduler->AddJob(Job(id, "*/10 * * * * *")).ok());
    owned_by_a += internal::RendezvousOwner({"a", "b"}, id, 0) == "a";
  }
  ASSERT_GT(owned_by_a, 0);
  ASSERT_LT(owned_by_a, kJobs);
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(AwaitLiveNodes(b, 2));
  StepTo(clock, b, kStart + seconds(11), milliseconds(250));
  ASSERT_TRUE(exec.AwaitFinished(kJobs));
  b.scheduler->Stop();
  EXPECT_EQ(coord.single, 0) << "no claim call of its own for a fire taken over";
  EXPECT_EQ(coord.batches, 2) << "b's own fires at :10, then a's taken over at :10.5";
  std::map<std::string, int> per_fire;
  for (const RecordedAttempt& at : exec.attempts()) ++per_fire[at.run_id];
  EXPECT_EQ(per_fire.size(), static_cast<size_t>(kJobs));
  for (const auto& [run, count] : per_fire) EXPECT_EQ(count, 1) << run;
}

// A peer's job whose takeover claim failed here: the fire is kept for when this node owns the
// job, and parked while the live set stays (JobTable::ParkLocked), so that the passes of a node
// that keeps many such fires do not walk them all. When the peer's heartbeat lapses the job is
// this node's, and a pass hands the fire to the misfire policy: once, so the one missed fire runs
// as a catch-up.
TEST(SchedulerTakeoverTest, AFailedTakeoverIsDecidedOnceThePeersJobIsOwnedHere) {
  FakeClock clock(kBoot);
  MemoryCoordinator backend(clock);
  CountingClaims coord(backend, kStart + seconds(30));
  coord.pending = false;
  ASSERT_NO_FATAL_FAILURE(AddHungPeer(backend, seconds(17)));  // live until kStart + 22 s
  RecordingExecutor exec;
  Node b("b", coord, exec, clock, TakeoverOptions());
  std::string id;
  for (int k = 0; id.empty(); ++k) {
    if (internal::RendezvousOwner({"a", "b"}, "p" + std::to_string(k), 0) == "a") {
      id = "p" + std::to_string(k);
    }
  }
  JobSpec job = Job(id, "*/10 * * * * *");
  job.overlap = OverlapPolicy::kAllow;
  ASSERT_TRUE(b.scheduler->AddJob(job).ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  ASSERT_TRUE(AwaitLiveNodes(b, 2));
  const std::string run10 = FireKey{id, kStart + seconds(10), 0, 1}.RunId();
  auto runs_of = [&](const std::string& run_id) {
    int n = 0;
    for (const RecordedAttempt& at : exec.attempts()) n += at.run_id == run_id;
    return n;
  };
  coord.down = true;  // the takeover of :10 at :10.5 fails
  StepTo(clock, b, kStart + seconds(12), milliseconds(250));
  coord.down = false;
  // :20 is taken over; the passes at :15 and :20 keep :10 (a's job).
  StepTo(clock, b, kStart + seconds(21), milliseconds(250));
  ASSERT_TRUE(exec.AwaitFinished(1));
  EXPECT_EQ(runs_of(run10), 0) << "decided by a node that does not own the job";
  // a's heartbeat lapses at :22: the job is b's, and a pass decides :10.
  StepTo(clock, b, kStart + seconds(41), milliseconds(250));
  ASSERT_TRUE(exec.AwaitFinished(4));  // :20, :30, :40 and :10's catch-up
  b.scheduler->Stop();
  EXPECT_EQ(b.scheduler->LiveNodes().size(), 1u);
  EXPECT_EQ(runs_of(run10), 1) << "the failed takeover was never decided";
}

// Job "t" (every 10 s, misfire = once) on node "a": :10 and :20 run; :30 cannot be claimed here
// until :33, and a peer's claim of it stands while `coord.pending` (CountingClaims). The pass at
// :35 hands :30 to the misfire policy: its catch-up's claim finds :30 claimed. (overlap = allow:
// a catch-up claimed by the pass at :50 must not meet :50's run and be skipped, as overlap =
// forbid rightly would.)
class MissedFireClaimedByAPeer : public ::testing::Test {
 protected:
  void MissThirty() {
    JobSpec t = Job("t", "*/10 * * * * *");
    t.overlap = OverlapPolicy::kAllow;
    ASSERT_TRUE(a.scheduler->AddJob(t).ok());
    ASSERT_TRUE(a.scheduler->Start().ok());
    StepTo(kStart + seconds(20));
    ASSERT_TRUE(exec.AwaitFinished(2));  // :10 and :20
    coord.down = true;
    StepTo(kStart + seconds(33));
    coord.down = false;
  }
  void StepTo(Instant t) { scheduler_test::StepTo(clock, a, t, seconds(1)); }
  int ClaimsOf30() {
    int n = 0;
    for (const SchedulerEvent& ev : a.observer.events()) {
      n += (ev.kind == Kind::kClaimLost || ev.kind == Kind::kClaimed) && ev.run_id == run30;
    }
    return n;
  }
  static SchedulerOptions Options() {
    SchedulerOptions opts;
    opts.housekeeping_interval = seconds(5);
    return opts;
  }

  FakeClock clock{kBoot};
  MemoryCoordinator backend{clock};
  CountingClaims coord{backend, kStart + seconds(30)};
  RecordingExecutor exec;
  Node a{"a", coord, exec, clock, Options()};
  const std::string run30 = FireKey{"t", kStart + seconds(30), 0, 1}.RunId();
};

// A backend whose claims are final (no wait_replicas): the claim that finds the one missed fire
// claimed by a peer ends the catch-up, with no read of its record: the fire was not missed
// after all. (A node that fell behind loses most of its catch-up claims to the peers that took
// its fires over; a read each would keep it behind.)
TEST_F(MissedFireClaimedByAPeer, TheCatchUpEndsAtTheClaimWhenClaimsAreFinal) {
  coord.withdrawable = false;
  MissThirty();
  StepTo(kStart + seconds(36));
  ASSERT_TRUE(a.observer.AwaitRun(Kind::kClaimLost, run30));
  StepTo(kStart + seconds(51));
  ASSERT_TRUE(exec.AwaitFinished(4));  // :40 and :50 on time
  a.scheduler->Stop();
  EXPECT_EQ(coord.reads, 0) << "no record read after the claim's answer";
  EXPECT_EQ(exec.attempts().size(), 4u) << ":30 is the peer's";
  EXPECT_EQ(a.observer.Count(Kind::kSkipped, "misfire"), 0);
  EXPECT_EQ(ClaimsOf30(), 1) << "one catch-up claim, not one a pass";
}

// A backend whose claims may be withdrawn (wait_replicas: a batch too few replicas acknowledged):
// the owner then reads the record, as for the catch-up of several fires. It waits while the
// peer's claim may be withdrawn, and once it is, runs :30 as the catch-up. Nothing is recorded
// skipped.
TEST_F(MissedFireClaimedByAPeer, TheCatchUpWaitsForAClaimThatMayBeWithdrawn) {
  MissThirty();
  StepTo(kStart + seconds(47));        // passes at :35, :40 and :45 find the peer's claim pending
  ASSERT_TRUE(exec.AwaitFinished(3));  // :40 on time
  ASSERT_GE(coord.reads, 2) << "each pass's claim of :30 found it claimed, and read its record";
  EXPECT_EQ(exec.attempts().size(), 3u) << "no catch-up while the peer's claim may stand";
  coord.pending = false;  // withdrawn
  // A later pass runs :30: the pass at :50, or the next one on a slow machine (TSan), where the
  // read that the pass at :45 made (a worker's task) may answer only after the pass at :50.
  ASSERT_TRUE(AdvanceUntil(
      clock,
      [&](milliseconds wait) { return a.observer.AwaitRun(Kind::kRunFinished, run30, wait); },
      milliseconds(500), seconds(20)))
      << [&] {
           std::string out;
           for (const SchedulerEvent& ev : a.observer.events()) {
             if (ev.run_id != run30) continue;
             out += "\n  " + std::string(ToString(ev.kind)) + (ev.catch_up ? " catch_up " : " ") +
                    ev.detail;
           }
           return out;
         }();
  // The fires the clock reached run before the stop: on a slow machine (TSan) :50's start may
  // still wait for a worker when :30's catch-up ends, and the stop would cancel it. (The clock
  // moves in 500 ms steps, so no fire is claimed ahead and unstarted here.) Due: :10 to :40,
  // and :50 on to now.
  ASSERT_GE(clock.Now(), kStart + seconds(50)) << ":30 runs in a pass at :50 or later";
  const size_t due =
      4 + static_cast<size_t>((clock.Now() - (kStart + seconds(50))) / seconds(10)) + 1;
  ASSERT_TRUE(exec.AwaitFinished(due)) << due << " fires due by now";
  a.scheduler->Stop();
  int ran30 = 0;
  for (const RecordedAttempt& at : exec.attempts()) ran30 += at.run_id == run30;
  EXPECT_EQ(ran30, 1) << "the withdrawn fire runs, once";
  bool catch_up = false;
  for (const SchedulerEvent& ev : a.observer.events()) {
    catch_up |= ev.kind == Kind::kClaimed && ev.run_id == run30 && ev.catch_up;
  }
  EXPECT_TRUE(catch_up) << "as the catch-up";
  EXPECT_EQ(a.observer.Count(Kind::kSkipped, "misfire"), 0);
  const auto history = History(backend, "t");
  ASSERT_GE(history.size(), 5u) << "every fire has one record (:10 to :50, and later ones)";
  std::set<Instant> fires;
  for (const RunRecord& r : history) {
    EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.run_id;
    EXPECT_TRUE(fires.insert(r.scheduled_at).second) << "one record per fire: " << r.run_id;
  }
  EXPECT_EQ(fires.size(), static_cast<size_t>((history.back().scheduled_at - kStart) / seconds(10)))
      << "no fire without its record";
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
  auto step_to = [&](Instant t) { StepTo(clock, a, t, milliseconds(250)); };
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
}  // namespace gnomon::scheduler_test

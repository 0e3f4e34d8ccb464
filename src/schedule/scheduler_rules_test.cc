// The engine under a job's FireRules (docs/semantics.md "Windows, calendars and jitter"): jitter,
// active windows and calendars, on a FakeClock.
#include "src/schedule/scheduler_test_util.h"

namespace gnomon::scheduler_test {
namespace {

Instant At(const char* rfc3339) { return *Instant::ParseRfc3339(rfc3339); }

// Records the clock's reading when each run starts (what the engine did, not when the test
// looked).
struct StartTimes {
  explicit StartTimes(RecordingExecutor& exec, const Clock& clock) {
    exec.SetBehavior([this, &clock](const JobSpec&, const RunContext& ctx) {
      std::lock_guard<std::mutex> lock(mu);
      at[ctx.run_id] = clock.Now();
      return ExecResult{};
    });
  }
  std::optional<Instant> Of(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = at.find(run_id);
    return it == at.end() ? std::nullopt : std::optional<Instant>(it->second);
  }
  std::mutex mu;
  std::map<std::string, Instant> at;
};

TEST(SchedulerRulesTest, JitterDelaysEachFireToTheSameInstantOnEveryNodeAcrossADstChange) {
  // Europe/Berlin springs forward on 2026-03-29 at 01:00Z (02:00 -> 03:00 local).
  FakeClock clock(At("2026-03-29T00:00:00Z"));
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  StartTimes starts(exec, clock);
  JobSpec j = Job("hourly", "0 30 * * * *");
  j.timezone = "Europe/Berlin";
  Rules(j).jitter = std::chrono::minutes(20);
  const Result<CompiledJob> compiled = CompileJob(j);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  Node a("a", coord, exec, clock);
  Node b("b", coord, exec, clock);
  ASSERT_TRUE(a.scheduler->AddJob(*compiled).ok());
  ASSERT_TRUE(b.scheduler->AddJob(*compiled).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  ASSERT_TRUE(b.scheduler->Start().ok());
  // The fires of the night, from the schedule itself: 01:30 CET, then 03:30 and 04:30 CEST
  // (02:30 does not exist that day).
  std::vector<Instant> fires;
  for (std::optional<Instant> f = compiled->schedule->Next(clock.Now()); fires.size() < 4;
       f = compiled->schedule->Next(*f)) {
    fires.push_back(*f);
  }
  ASSERT_EQ(fires[0], At("2026-03-29T00:30:00Z"));
  ASSERT_EQ(fires[1], At("2026-03-29T01:30:00Z"));
  std::set<Duration> offsets;
  for (size_t i = 0; i < fires.size(); ++i) {
    const Instant due = DueAt(j, fires[i]);
    offsets.insert(due - fires[i]);
    ASSERT_LT(due - fires[i], FireRulesOf(j).jitter);
    AdvanceTo(clock, due - seconds(1));
    EXPECT_FALSE(exec.AwaitFinished(i + 1, milliseconds(100))) << "fire " << i << " ran early";
    AdvanceTo(clock, due);
    ASSERT_TRUE(exec.AwaitFinished(i + 1)) << "fire " << i;
    const std::string run_id = FireKey{"hourly", fires[i], 0, 1}.RunId();
    EXPECT_EQ(starts.Of(run_id), due)
        << "the run id is the scheduled instant's; it starts when due";
  }
  EXPECT_GT(offsets.size(), 1u) << "each fire has its own offset";
  a.scheduler->Stop();
  b.scheduler->Stop();
  EXPECT_EQ(exec.attempts().size(), fires.size()) << "each fire claimed once by the two nodes";
  for (const SchedulerEvent& e : a.observer.events()) {
    if (e.kind == Kind::kClaimed) {
      EXPECT_EQ(e.duration, Duration(0)) << "lateness from the due instant";
    }
  }
}

TEST(SchedulerRulesTest, AFireWhoseJitterIsStillAheadAtStartRunsWhenDueNotAsACatchUp) {
  FakeClock clock(kBoot);
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  StartTimes starts(exec, clock);
  JobSpec j = Job("spread", "0 0 * * * *");
  Rules(j).jitter = std::chrono::minutes(30);
  // The first hour whose offset is over two minutes.
  Instant f = kStart;
  while (JitterOffset(j, f) < minutes(2)) f = f + std::chrono::hours(1);
  clock.Advance(f + minutes(1) - clock.Now());  // the node starts after the instant, before due
  Node n("n", coord, exec, clock);
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  EXPECT_FALSE(exec.AwaitFinished(1, milliseconds(100)));
  AdvanceTo(clock, DueAt(j, f));
  ASSERT_TRUE(exec.AwaitFinished(1));
  n.scheduler->Stop();
  EXPECT_EQ(starts.Of(FireKey{"spread", f, 0, 1}.RunId()), DueAt(j, f));
  EXPECT_EQ(n.observer.Count(Kind::kSkipped, "misfire"), 0);
  for (const SchedulerEvent& e : n.observer.events()) EXPECT_FALSE(e.catch_up);
}

TEST(SchedulerRulesTest, ACalendarExcludesTheDayAnLScheduleLandsOn) {
  FakeClock clock(At("2026-03-30T00:00:00Z"));
  MemoryCoordinator coord(clock);
  RecordingExecutor exec;
  Calendars calendars;
  ASSERT_TRUE(calendars.Add({"quarter-close", {"2026-03-31"}, "test"}).ok());
  JobSpec j = Job("month-end", "0 0 3 L * *");  // 03:00 on the last day of the month
  Rules(j).calendars = {"quarter-close"};
  const Result<CompiledJob> compiled = CompileJob(j, &calendars);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  Node n("n", coord, exec, clock);
  ASSERT_TRUE(n.scheduler->AddJob(*compiled).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  EXPECT_EQ(n.scheduler->GetJob("month-end")->next_fire, At("2026-04-30T03:00:00Z"));
  AdvanceTo(clock, At("2026-03-31T03:00:00Z"));
  EXPECT_FALSE(exec.AwaitFinished(1, milliseconds(200)));
  AdvanceTo(clock, At("2026-04-30T03:00:00Z"));
  ASSERT_TRUE(exec.AwaitFinished(1));
  n.scheduler->Stop();
  ASSERT_EQ(exec.attempts().size(), 1u);
  EXPECT_EQ(exec.attempts()[0].scheduled_at, At("2026-04-30T03:00:00Z"));
  const std::vector<RunRecord> history = History(coord, "month-end");
  ASSERT_EQ(history.size(), 1u) << "an excluded fire is not run and not recorded missed";
  EXPECT_EQ(n.observer.Count(Kind::kSkipped), 0);
}

TEST_F(SchedulerTest, AWindowAndMaxRunsBoundTheFires) {
  Node n("n", coord_, exec_, clock_);
  JobSpec j = Job("window", "0 * * * * *");
  Rules(j).start_at = kStart + minutes(3);
  Rules(j).max_runs = 2;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  std::optional<JobView> view = n.scheduler->GetJob("window");
  ASSERT_TRUE(view);
  EXPECT_EQ(view->next_fire, kStart + minutes(3)) << "the first fire of the window";
  ASSERT_TRUE(view->rules);
  EXPECT_EQ(view->rules->WindowAt(clock_.Now()), FireRules::Window::kNotStarted);
  AdvanceTo(clock_, kStart + minutes(2));
  EXPECT_FALSE(exec_.AwaitFinished(1, milliseconds(100)));
  AdvanceTo(clock_, kStart + minutes(3));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  AdvanceTo(clock_, kStart + minutes(4));
  ASSERT_TRUE(exec_.AwaitFinished(2));
  AdvanceTo(clock_, kStart + minutes(6));
  EXPECT_FALSE(exec_.AwaitFinished(3, milliseconds(200)));
  view = n.scheduler->GetJob("window");
  EXPECT_EQ(view->next_fire, std::nullopt);
  EXPECT_EQ(view->rules->WindowAt(clock_.Now()), FireRules::Window::kEnded);
  n.scheduler->Stop();
  EXPECT_EQ(History(coord_, "window").size(), 2u);
}

TEST_F(SchedulerTest, ExcludedInstantsAreRecordedSkippedWhenAsked) {
  Node n("n", coord_, exec_, clock_);
  JobSpec j = Job("daily", "0 0 0 * * *");
  Rules(j).exclude = {"2026-03-02"};
  Rules(j).record_excluded = true;
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  AdvanceTo(clock_, At("2026-03-02T00:00:00Z"));
  ASSERT_TRUE(n.observer.Await(Kind::kSkipped, 1, "excluded"));
  AdvanceTo(clock_, At("2026-03-03T00:00:00Z"));
  ASSERT_TRUE(exec_.AwaitFinished(1));
  n.scheduler->Stop();
  const std::vector<RunRecord> history = History(coord_, "daily");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].scheduled_at, At("2026-03-02T00:00:00Z"));
  EXPECT_EQ(history[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(history[0].skip_reason, "excluded");
  EXPECT_EQ(history[1].scheduled_at, At("2026-03-03T00:00:00Z"));
  EXPECT_EQ(history[1].outcome, RunOutcome::kSucceeded);
}

TEST_F(SchedulerTest, BackfillLeavesExcludedFiresOut) {
  Node n("n", coord_, exec_, clock_);
  JobSpec j = Job("daily", "0 0 0 * * *");
  Rules(j).exclude = {"2026-02-25"};
  // The newest fire is recorded before the start, so the start's catch-up finds nothing missed
  // (a backfill's claims, which set the job's last instant while none is recorded, would
  // otherwise race the catch-up's read of it and have the older fires recorded missed).
  ASSERT_TRUE(coord_.RecordSkipped(FireKey{"daily", kStart}, "elsewhere", "misfire").ok());
  ASSERT_TRUE(n.scheduler->AddJob(j).ok());
  ASSERT_TRUE(n.scheduler->Start().ok());
  Result<BackfillPlan> plan = n.scheduler->Backfill("daily", At("2026-02-23T00:00:00Z"),
                                                    At("2026-02-27T00:00:00Z"), 1, 100, "test");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->run_ids,
            (std::vector<std::string>{FireKey{"daily", At("2026-02-23T00:00:00Z")}.RunId(),
                                      FireKey{"daily", At("2026-02-24T00:00:00Z")}.RunId(),
                                      FireKey{"daily", At("2026-02-26T00:00:00Z")}.RunId()}));
  ASSERT_TRUE(exec_.AwaitFinished(3));
  n.scheduler->Stop();
  // The three backfilled fires and the newest one's record, nothing else.
  std::map<std::string, RunOutcome> outcomes;
  for (const RunRecord& r : History(coord_, "daily")) outcomes[r.run_id] = r.outcome;
  EXPECT_EQ(outcomes, (std::map<std::string, RunOutcome>{
                          {plan->run_ids[0], RunOutcome::kSucceeded},
                          {plan->run_ids[1], RunOutcome::kSucceeded},
                          {plan->run_ids[2], RunOutcome::kSucceeded},
                          {FireKey{"daily", kStart}.RunId(), RunOutcome::kSkipped}}));
}

}  // namespace
}  // namespace gnomon::scheduler_test

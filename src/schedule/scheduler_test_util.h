// Helpers shared by the scheduler's tests (scheduler_test.cc, scheduler_policy_test.cc,
// scheduler_backend_test.cc): a clock set before a whole minute, one node on a shared backend, and
// waits that advance the FakeClock until the engine reacted.
#ifndef GNOMON_SRC_SCHEDULE_SCHEDULER_TEST_UTIL_H_
#define GNOMON_SRC_SCHEDULE_SCHEDULER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gnomon/scheduler.h"
#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/forwarding_coordinator.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/schedule/rendezvous.h"

namespace gnomon::scheduler_test {

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
inline const Instant kStart = Instant::FromUnixSeconds(1772323200);
inline const Instant kBoot = kStart + std::chrono::seconds(5);

// Moves `clock` forward to `t`.
inline void AdvanceTo(testing::FakeClock& clock, Instant t) { clock.Advance(t - clock.Now()); }

inline JobSpec Job(const std::string& id, const std::string& schedule) {
  JobSpec j;
  j.id = id;
  j.schedule = schedule;
  j.in_process = true;
  return j;
}

// The job's FireRulesSpec to set keys of (created when unset).
inline FireRulesSpec& Rules(JobSpec& j) {
  return j.fire_rules ? *j.fire_rules : j.fire_rules.emplace();
}

inline std::vector<RunRecord> History(Coordinator& c, const std::string& job) {
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
inline bool AdvanceUntil(FakeClock& clock, const std::function<bool(milliseconds)>& await,
                         Duration step, Duration limit) {
  for (Duration passed{0}; passed < limit; passed += step) {
    if (await(milliseconds(50))) return true;
    clock.Advance(step);
  }
  return await(seconds(10));
}

// Every node answers every fire with a claim or a lost claim.
inline bool AwaitAnswered(RecordingObserver& obs, int fires) {
  for (int i = 0; i < 40; ++i) {
    if (obs.Count(Kind::kClaimed) + obs.Count(Kind::kClaimLost) >= fires) return true;
    obs.Await(Kind::kClaimLost, fires, {}, milliseconds(50));
  }
  return false;
}

// Housekeeping runs every 5 s of fake time; advance until a lost run was resolved.
inline bool AdvanceUntilLost(FakeClock& clock, RecordingObserver& obs) {
  for (int i = 0; i < 10; ++i) {
    if (obs.Await(Kind::kLostRun, 1, {}, milliseconds(200))) return true;
    clock.Advance(seconds(5));
  }
  return false;
}

// Node "a" runs `job`'s fire at kStart + 60 s (an every-minute job, the clock before it) and
// stops: the job then has a last claimed instant, from which the next node's start catches up
// the fires missed meanwhile. Call it in ASSERT_NO_FATAL_FAILURE.
inline void RunFirstFireAndStop(Coordinator& coord, RecordingExecutor& exec, FakeClock& clock,
                                const JobSpec& job) {
  Node a("a", coord, exec, clock);
  ASSERT_TRUE(a.scheduler->AddJob(job).ok());
  ASSERT_TRUE(a.scheduler->Start().ok());
  AdvanceTo(clock, kStart + seconds(60));
  ASSERT_TRUE(exec.AwaitFinished(1));
  a.scheduler->Stop();
}

class SchedulerTest : public ::testing::Test {
 protected:
  FakeClock clock_{kBoot};
  MemoryCoordinator coord_{clock_};
  RecordingExecutor exec_;
};

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
  bool AwaitCall() { return AwaitCalls(1); }
  // Waits (real time, up to 10 s) until `n` calls came.
  bool AwaitCalls(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, seconds(10), [&] { return calls_ >= n; });
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

}  // namespace gnomon::scheduler_test

#endif  // GNOMON_SRC_SCHEDULE_SCHEDULER_TEST_UTIL_H_

// TimerLoop: the one timer queue (a min-heap by due instant, on the backend's clock) and the loop
// thread that waits on the injected Clock until the earliest timer or claimed-ahead instant,
// woken when jobs change. Due timers are a job's fires (handed to the ClaimDispatcher when on
// time, to the MisfireHandler when missed), takeover checks and claim retries (ClaimDispatcher),
// and the housekeeping and state-poll ticks (Housekeeping). Every task goes to the worker pool:
// the loop never calls the backend.
//
// Threads: the loop thread (Loop); pool workers and API callers push timers and wake it.
//
// Thread safety: the heap and the wake flag are guarded by JobTable::mu() (the engine lock: a
// job's fires are expanded with its cursor in one step); methods named ...Locked REQUIRE it. The
// loop holds it except while it waits. Lock order: JobTable::mu() before WorkerPool::mu_.
#ifndef GNOMON_SRC_SCHEDULE_TIMER_LOOP_H_
#define GNOMON_SRC_SCHEDULE_TIMER_LOOP_H_

#include <condition_variable>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/schedule/job_table.h"

namespace gnomon::internal {

class ClaimDispatcher;
class Housekeeping;
class MisfireHandler;

// kFire: a job's next instants; kDelayedFire: one fire whose jitter put it past the horizon its
// instant was expanded in.
enum class TimerKind : uint8_t {
  kFire,
  kDelayedFire,
  kClaimRetry,
  kTakeover,
  kHousekeeping,
  kStatePoll
};
struct Timer {
  Instant due;  // on the backend's clock
  TimerKind kind;
  uint64_t gen;       // kFire, kDelayedFire: the job's generation when queued
  FireKey fire;       // kFire: nothing; kDelayedFire: job_id and instant; others: the fire
  uint32_t slot = 0;  // kFire, kDelayedFire: the job's JobEntry::slot when queued
  bool operator>(const Timer& o) const { return due > o.due; }
};

// The timer min-heap (earliest due on top). Every push and pop walks a path of a heap that holds
// a timer per job, so its entries are small and trivially moved (32 bytes): the FireKey of a
// timer that carries one (kDelayedFire, kClaimRetry, kTakeover) waits beside the heap.
class TimerHeap {
 public:
  bool empty() const { return heap_.empty(); }
  Instant top_due() const { return heap_.front().due; }
  TimerKind top_kind() const { return heap_.front().kind; }
  void push(Timer t);
  Timer pop();

 private:
  static constexpr uint32_t kNoFire = UINT32_MAX;
  struct Entry {
    Instant due;
    uint64_t gen;
    uint32_t slot;
    uint32_t fire;  // its FireKey's index in fires_, or kNoFire
    TimerKind kind;
    bool operator>(const Entry& o) const { return due > o.due; }
  };
  static_assert(sizeof(Entry) == 32);
  std::vector<Entry> heap_;
  std::vector<FireKey> fires_;        // the FireKeys of queued timers; free ones are listed in
  std::vector<uint32_t> free_fires_;  // free_fires_ (and all dropped once every one is free)
};

class TimerLoop {
 public:
  TimerLoop(EngineContext& ctx, JobTable& table) : ctx_(ctx), table_(table) {}
  TimerLoop(const TimerLoop&) = delete;
  TimerLoop& operator=(const TimerLoop&) = delete;
  // The parts the due timers go to. REQUIRES: before Start.
  void Wire(ClaimDispatcher& dispatch, MisfireHandler& misfire, Housekeeping& housekeeping);

  // Starts the loop thread (with the housekeeping and state-poll ticks due at `at`).
  void Start(Instant at) GNOMON_EXCLUDES(table_.mu());
  // Joins the loop thread. REQUIRES: EngineContext::SetStopping was called.
  void Join() GNOMON_EXCLUDES(table_.mu());

  void PushLocked(Timer t) GNOMON_REQUIRES(table_.mu()) { timers_.push(std::move(t)); }
  // Queues the job's next fire after its cursor (none while it is disabled). `known`: that fire,
  // when the caller has it.
  void ScheduleNextLocked(JobEntry& e, std::optional<std::optional<Instant>> known = std::nullopt)
      GNOMON_REQUIRES(table_.mu());
  // Makes the loop recompute what is due (a job changed, an earlier timer or start).
  void WakeLocked() GNOMON_REQUIRES(table_.mu());
  // Wakes a loop waiting for EngineContext::Stopping.
  void NotifyStop() { cv_.notify_all(); }
  // Waits until `at` (the backend's clock) or a wake. Scheduler::Stop only, after Join.
  void SleepUntilLocked(MutexLock& lock, Instant at) GNOMON_REQUIRES(table_.mu());

  static constexpr size_t kClaimBatch = 256;  // fires claimed in one call at most

 private:
  void Loop() GNOMON_EXCLUDES(table_.mu());
  void HandleTimerLocked(const Timer& t) GNOMON_REQUIRES(table_.mu());
  // A job's timer: every fire in (cursor, now + claim_ahead] is handled: claimed when due by
  // then (its instant plus its jitter offset), else given a kDelayedFire timer at its due instant.
  void HandleFireLocked(JobEntry& e) GNOMON_REQUIRES(table_.mu());
  // Appends the instants of the schedule in (after, until] that the job's exclusions leave out
  // inside its window, when it records them (record_excluded); at most kMaxMisfires.
  void CollectExcludedLocked(const JobEntry& e, Instant after, Instant until,
                             std::vector<Instant>& out) GNOMON_REQUIRES(table_.mu());
  // A delayed fire come due: claimed, or a misfire when late (a job changed since keeps it only
  // if it is still one of its fires, at its due instant under the new definition).
  void HandleDelayedLocked(const Timer& t, JobEntry& e) GNOMON_REQUIRES(table_.mu());

  EngineContext& ctx_;
  JobTable& table_;
  ClaimDispatcher* dispatch_ = nullptr;
  MisfireHandler* misfire_ = nullptr;
  Housekeeping* housekeeping_ = nullptr;
  std::condition_variable cv_;  // with JobTable::mu()
  TimerHeap timers_ GNOMON_GUARDED_BY(table_.mu());
  bool wake_ GNOMON_GUARDED_BY(table_.mu()) = false;
  // HandleFireLocked's fires of one timer, kept for their capacity.
  std::vector<Instant> missed_scratch_ GNOMON_GUARDED_BY(table_.mu());
  std::vector<Instant> on_time_scratch_ GNOMON_GUARDED_BY(table_.mu());
  std::jthread thread_;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_TIMER_LOOP_H_

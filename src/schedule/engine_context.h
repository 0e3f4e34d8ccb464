// EngineContext: what every part of the scheduler shares (docs/architecture.md, "The engine's
// threads, locks and hand-offs"): the options, the Coordinator, Executor and Clock, the clock
// skew to the backend, the stop flag, the worker pool, the random source, and the helpers that
// build records and events. The parts (JobTable, TimerLoop, ClaimDispatcher, RunDriver,
// LeaseKeeper, Housekeeping, MisfireHandler) each hold a reference to one; Scheduler wires them.
//
// Thread safety: thread-safe. Called by every engine thread and by API callers. Its one lock,
// rng_mu_, is a leaf (nothing is taken under it). The pool is created by StartPool (Scheduler::
// Start, before any engine thread runs) and shut down by Scheduler::Stop.
#ifndef GNOMON_SRC_SCHEDULE_ENGINE_CONTEXT_H_
#define GNOMON_SRC_SCHEDULE_ENGINE_CONTEXT_H_

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "gnomon/scheduler.h"
#include "src/base/thread_annotations.h"
#include "src/schedule/worker_pool.h"

namespace gnomon::internal {

// Why the scheduler stopped a run.
enum class StopReason { kNone, kTimeout, kLeaseLost, kSelfFenced, kReplaced, kShutdown };
// How a run stopped for `reason` is described in its record ("timed out", ...).
std::string_view ReasonText(StopReason reason);

// A job's definition, shared (never copied) by its timers' fires, batches and runs.
using SpecPtr = std::shared_ptr<const JobSpec>;

// Most missed fires handled (run or recorded) per job per pass; the rest are dropped from view
// (and counted in the event detail).
inline constexpr int kMaxMisfires = 1000;
// Job states read per backend call (start-up catch-up, state poll).
inline constexpr size_t kStateBatch = 512;

inline constexpr auto kRunLane = WorkerPool::Lane::kRun;
inline constexpr auto kControlLane = WorkerPool::Lane::kControl;
inline constexpr auto kClaimLane = WorkerPool::Lane::kClaim;

class EngineContext {
 public:
  // `coordinator`, `executor` and `clock` must outlive the context.
  EngineContext(SchedulerOptions options, Coordinator& coordinator, Executor& executor,
                Clock& clock);

  const SchedulerOptions& options() const { return options_; }
  Coordinator& coord() const { return coord_; }
  Executor& exec() const { return exec_; }
  Clock& clock() const { return clock_; }
  // lease_margin, defaulted to ttl/3.
  Duration margin() const { return margin_; }

  // The backend's clock as this node estimates it: its own clock minus the skew measured at
  // start and by every housekeeping pass. *When* to fire is decided on this clock, so a node
  // whose clock is off neither runs fires early (the backend would refuse) nor late, nor takes
  // future fires for missed ones.
  Instant Now() const { return clock_.Now() - skew(); }
  // Node clock minus backend clock, as last measured.
  Duration skew() const { return Duration(skew_ms_.load()); }
  // Measures node clock minus backend clock (at the midpoint of one call) and adopts it; keeps
  // the last good value when the call fails or is slow. Calls the backend.
  Duration MeasureSkew();

  // Set once by Scheduler::Stop (under JobTable::mu(), as the loop waits on it).
  bool Stopping() const { return stopping_.load(); }
  void SetStopping() { stopping_ = true; }

  // When Start placed the jobs (on the backend's clock); set once by Start.
  Instant started_at() const { return started_at_; }
  void set_started_at(Instant at) { started_at_ = at; }

  // The worker pool. REQUIRES: StartPool was called.
  WorkerPool& pool() const { return *pool_; }
  bool has_pool() const { return pool_ != nullptr; }
  void StartPool();

  // How long before its instant a fire of `spec` is claimed (SchedulerOptions::claim_ahead,
  // capped at skew_tolerance / 2; 0 unless overlap = allow).
  Duration AheadOf(const JobSpec& spec) const;
  ClaimRequest RequestFor(const JobSpec& spec, const FireKey& fire) const;
  // When `fire` was due, for its lateness: its instant plus the offset it waited (WaitedOffset).
  static Instant DueOf(const JobSpec& spec, const FireKey& fire) {
    return fire.scheduled_at + WaitedOffset(spec, fire.scheduled_at);
  }

  // A record of `claim`'s attempt of `fire`, started now, with no outcome yet.
  RunRecord BaseRecord(const FireKey& fire, const Claim& claim) const;
  // The final record of an attempt that was claimed but never executed.
  RunRecord NotRunRecord(const Claim& claim, RunOutcome outcome, std::string error) const;

  // Uniform in [0, n) (0 when n <= 0).
  int64_t RandomBelow(int64_t n) GNOMON_EXCLUDES(rng_mu_);
  // "00-<trace id: 32 hex>-<span id: 16 hex>-01", one per attempt.
  std::string TraceParent() GNOMON_EXCLUDES(rng_mu_);

  // Events, built only when someone listens (a run id is formatted for each). The observer is
  // called on the caller's thread: callers hold no engine lock but Housekeeping's pass flag.
  SchedulerEvent MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire) const;
  SchedulerEvent MakeEvent(SchedulerEvent::Kind kind, const FireKey& fire,
                           const Claim& claim) const;
  void Emit(SchedulerEvent::Kind kind, const FireKey& fire, std::string detail) const;
  void Notify(const SchedulerEvent& ev) const;
  bool observed() const { return options_.observer != nullptr; }

 private:
  const SchedulerOptions options_;
  Coordinator& coord_;
  Executor& exec_;
  Clock& clock_;
  const Duration margin_;
  const Duration ahead_;  // claim_ahead, capped

  std::atomic<int64_t> skew_ms_{0};  // node clock minus backend clock (MeasureSkew)
  std::atomic<bool> stopping_{false};
  Instant started_at_;
  std::unique_ptr<WorkerPool> pool_;

  Mutex rng_mu_;
  std::mt19937_64 rng_ GNOMON_GUARDED_BY(rng_mu_);
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_ENGINE_CONTEXT_H_

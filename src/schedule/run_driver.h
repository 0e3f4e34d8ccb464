// RunDriver: runs a claimed fire to its end: its attempts through the Executor (with the
// LeaseKeeper keeping the lease and enforcing the timeout), its retries, and its reports.
//
// No worker waits on the clock: a retry's backoff, and the pause between two sends of a report
// the backend could not take (Unavailable), are timers (LeaseKeeper::ResumeAfter): the worker
// that ran the attempt is freed, and the next step runs as a new task of the pool's run lane when
// the timer is due (at once when the scheduler stops). A run is therefore a chain of steps:
// RunFire (claim, register) -> attempt -> [report, backoff timer, NextAttempt -> attempt]... ->
// final report -> end. Each step holds the run's state (Run) by shared pointer.
//
// Reports go through the RunReporter (final ones queued for its drain; catch-up runs,
// backfills and queue-mode runs report inline).
//
// Threads: pool workers (every step), the LeaseKeeper's watchdog (submits resumed steps; runs
// them itself only once the pool is shut down).
//
// Thread safety: thread-safe; it has no lock of its own. JobTable::mu() and LeaseKeeper::mu_ are
// taken (by their methods) one at a time; none is held during a backend or executor call.
#ifndef GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_
#define GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/schedule/job_table.h"
#include "src/schedule/lease_keeper.h"
#include "src/schedule/live_output.h"
#include "src/schedule/run_reporter.h"

namespace gnomon::internal {

class ClaimDispatcher;

// How RunFire runs a fire.
struct RunOptions {
  // A missed fire run per `misfire` (its claim's events say so: SchedulerEvent::catch_up).
  bool catch_up = false;
  // The final report is sent before the run's `then` (a queue worker acknowledges the fire
  // after it); otherwise it joins the report queue. Catch-up runs report inline too.
  bool report_inline = false;
  // Why the fire runs, in its records from the claim on ("backfill by ops"); "" = scheduled.
  std::string cause;
  // The job's JobEntry::slot, when the caller knows it (a hint for JobTable::AdjustRunning).
  uint32_t job_slot = JobTable::kNoSlot;
};

class RunDriver {
 public:
  RunDriver(EngineContext& ctx, JobTable& table, LeaseKeeper& lease, LiveOutput& live_output)
      : ctx_(ctx),
        table_(table),
        lease_(lease),
        live_output_(live_output),
        reporter_(ctx, table, lease) {}
  RunDriver(const RunDriver&) = delete;
  RunDriver& operator=(const RunDriver&) = delete;
  // Claims go through `dispatch` (AcceptClaim, StartClaimed). REQUIRES: before any RunFire.
  void Wire(ClaimDispatcher& dispatch) { dispatch_ = &dispatch; }
  // RunReporter::OnEnded. REQUIRES: before any RunFire.
  void OnEnded(RunReporter::EndedHook hook) { reporter_.OnEnded(std::move(hook)); }

  // Runs `fire` of `job`: claims it first unless `resumed` (a claim this node holds, its claim
  // or last renewal sent at steady `claim_sent`), then attempts, retries and reports it. A fire
  // claimed ahead of its instant is handed to ClaimDispatcher::StartClaimed instead. `then`
  // (may be empty) is called once, on a worker, when the run's last attempt ended and its report
  // was queued (or sent, with report_inline), or at once when there is nothing to run here.
  void RunFire(const SpecPtr& job, const FireKey& fire, std::optional<Claim> resumed,
               Duration claim_sent, const RunOptions& opts, std::function<void()> then);
  // Claims and runs `fires` of `spec` one after another, each to its end (catch-up runs, so
  // that overlap = forbid does not skip them against each other).
  void RunInOrder(const SpecPtr& spec, std::vector<FireKey> fires, const RunOptions& opts);

 private:
  struct Run;
  struct Sequence;

  void RunInOrder(const std::shared_ptr<Sequence>& seq);
  // Runs one attempt; then the final report, or this attempt's report and a backoff timer.
  void AttemptStep(const std::shared_ptr<Run>& r);
  // The backoff is over: the next attempt's claim (Coordinator::NextAttempt), then its attempt.
  void AfterBackoff(const std::shared_ptr<Run>& r);
  // One attempt: run the executor with the watchdog watching; the record of how it ended.
  RunRecord Attempt(const JobSpec& spec, const FireKey& fire, const Claim& claim, ActiveRun& run,
                    Duration& took, std::string& traceparent);

  EngineContext& ctx_;
  JobTable& table_;
  LeaseKeeper& lease_;
  LiveOutput& live_output_;
  ClaimDispatcher* dispatch_ = nullptr;
  RunReporter reporter_;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_

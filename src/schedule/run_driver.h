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
// Final reports go to the backend together (Coordinator::ReportMany): the first report queued
// while no drain is pending queues one drain task in the run lane, behind the fires already
// waiting to start; the drain sends every report queued by then in one call, and again while
// more come. No worker waits for its own report's answer, and the fires that end together are
// reported together. Catch-up runs, backfills and queue-mode runs report inline instead.
//
// Threads: pool workers (every step), the LeaseKeeper's watchdog (submits resumed steps; runs
// them itself only once the pool is shut down).
//
// Thread safety: thread-safe. Lock order: reports_mu_ is a leaf, taken with no other lock held;
// JobTable::mu() and LeaseKeeper::mu_ are taken (by their methods) one at a time. No lock is
// held during a backend or executor call.
#ifndef GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_
#define GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/schedule/job_table.h"
#include "src/schedule/lease_keeper.h"
#include "src/schedule/live_output.h"

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
};

class RunDriver {
 public:
  RunDriver(EngineContext& ctx, JobTable& table, LeaseKeeper& lease, LiveOutput& live_output)
      : ctx_(ctx), table_(table), lease_(lease), live_output_(live_output) {}
  RunDriver(const RunDriver&) = delete;
  RunDriver& operator=(const RunDriver&) = delete;
  // Claims go through `dispatch` (AcceptClaim, StartClaimed). REQUIRES: before any RunFire.
  void Wire(ClaimDispatcher& dispatch) { dispatch_ = &dispatch; }

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
  struct FinishedAttempt;
  struct Sequence;

  void RunInOrder(const std::shared_ptr<Sequence>& seq);
  // Runs one attempt; then the final report, or this attempt's report and a backoff timer.
  void AttemptStep(const std::shared_ptr<Run>& r);
  // The backoff is over: the next attempt's claim (Coordinator::NextAttempt), then its attempt.
  void AfterBackoff(const std::shared_ptr<Run>& r);
  // One attempt: run the executor with the watchdog watching; the record of how it ended.
  RunRecord Attempt(const JobSpec& spec, const FireKey& fire, const Claim& claim, ActiveRun& run,
                    Duration& took, std::string& traceparent);
  // Reports a->rec under a->reporting, sending it again after a transient backend error
  // (Unavailable) while the claim may still hold (until the run's self-fence deadline),
  // `backoff` (100 ms doubling to 1 s) apart, each wait a LeaseKeeper timer; `then` gets the
  // last answer.
  void ReportWhileHeld(const std::shared_ptr<FinishedAttempt>& a, bool final, Duration backoff,
                       std::function<void(const Status&)> then);
  void QueueReport(std::shared_ptr<FinishedAttempt> done) GNOMON_EXCLUDES(reports_mu_);
  void DrainReports() GNOMON_EXCLUDES(reports_mu_);
  // Sends the final report of a run (while its lease holds), then ends the run and calls `then`.
  void FinishRun(const std::shared_ptr<FinishedAttempt>& a, std::function<void()> then);
  // Once its final report is answered: announces the run's end and ends it.
  void EndReported(FinishedAttempt& a, const Status& reported);
  // Announced once recorded, so whoever hears it can read it back from the backend.
  void AnnounceFinished(const FireKey& fire, const Claim& attempt, const RunRecord& rec,
                        Duration took, const std::string& traceparent);
  void EndRun(const JobSpec& spec, const FireKey& fire, const std::shared_ptr<ActiveRun>& run,
              RunOutcome final_outcome);
  // max_consecutive_failures: pauses the job cluster-wide when its failures reached it.
  void Breaker(const JobSpec& spec);

  static constexpr size_t kReportBatch = 128;  // final reports per ReportMany call

  EngineContext& ctx_;
  JobTable& table_;
  LeaseKeeper& lease_;
  LiveOutput& live_output_;
  ClaimDispatcher* dispatch_ = nullptr;

  Mutex reports_mu_;
  // Final reports waiting to be sent; a drain task is queued or running while
  // report_drain_queued_.
  std::deque<std::shared_ptr<FinishedAttempt>> reports_ GNOMON_GUARDED_BY(reports_mu_);
  bool report_drain_queued_ GNOMON_GUARDED_BY(reports_mu_) = false;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_RUN_DRIVER_H_

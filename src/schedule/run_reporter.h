// RunReporter: a run's reports and its end. Each attempt's record is reported under the claim it
// ran with; a report the backend could not take (Unavailable) is sent again while the lease may
// hold, each pause a LeaseKeeper timer (no worker waits). Final reports go to the backend
// together (Coordinator::ReportMany): the first report queued while no drain is pending queues
// one drain task in the run lane, behind the fires already waiting to start; the drain sends
// every report queued by then in one call (up to kReportBatch), and again while more come. A
// backlog of more than a batch per drain queues another drain, up to kMaxDrains. No worker waits
// for its own report's answer, and the fires that end together are reported together. A run ends
// (EndRun) once its final report is answered: it is unregistered from the LeaseKeeper, counted
// in its job, and the breaker (max_consecutive_failures) is checked.
//
// Threads: pool workers (RunDriver's steps, the drain, report retries), the LeaseKeeper's
// watchdog once the pool is shut down.
//
// Thread safety: thread-safe. Lock order: reports_mu_ is a leaf, taken with no other lock held;
// JobTable::mu() and LeaseKeeper::mu_ are taken (by their methods) one at a time. No lock is
// held during a backend call.
#ifndef GNOMON_SRC_SCHEDULE_RUN_REPORTER_H_
#define GNOMON_SRC_SCHEDULE_RUN_REPORTER_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "src/schedule/job_table.h"
#include "src/schedule/lease_keeper.h"

namespace gnomon::internal {

// A run's attempt, ended, and the claim its report goes under.
struct FinishedAttempt {
  SpecPtr job;
  FireKey fire;
  std::shared_ptr<ActiveRun> run;
  Claim attempt;
  Claim reporting;
  RunRecord rec;
  Duration took{0};
  std::string traceparent;
};

class RunReporter {
 public:
  RunReporter(EngineContext& ctx, JobTable& table, LeaseKeeper& lease)
      : ctx_(ctx), table_(table), lease_(lease) {}
  RunReporter(const RunReporter&) = delete;
  RunReporter& operator=(const RunReporter&) = delete;

  // Reports a->rec under a->reporting, sending it again after a transient backend error
  // (Unavailable) while the claim may still hold (until the run's self-fence deadline),
  // `backoff` (100 ms doubling to 1 s) apart; `then` gets the last answer.
  void ReportWhileHeld(const std::shared_ptr<FinishedAttempt>& a, bool final, Duration backoff,
                       std::function<void(const Status&)> then);
  // Sends the final report of a run (while its lease holds), then ends the run and calls `then`
  // (may be empty).
  void Finish(const std::shared_ptr<FinishedAttempt>& a, std::function<void()> then);
  // Queues the final report of a run for the drain, which ends the run once it is answered.
  void Queue(std::shared_ptr<FinishedAttempt> done) GNOMON_EXCLUDES(reports_mu_);

  // Called, on the reporting thread, for each run whose final report the backend took
  // (docs/semantics.md "Dependencies": the run's children are fired from it). REQUIRES: set
  // before any run.
  using EndedHook = std::function<void(const JobSpec&, const FireKey&, const RunRecord&)>;
  void OnEnded(EndedHook hook) { on_ended_ = std::move(hook); }

  // Announced once recorded, so whoever hears it can read it back from the backend.
  void AnnounceFinished(const FireKey& fire, const Claim& attempt, const RunRecord& rec,
                        Duration took, const std::string& traceparent);
  void EndRun(const JobSpec& spec, const FireKey& fire, const std::shared_ptr<ActiveRun>& run,
              RunOutcome final_outcome);

 private:
  // Sends the final reports queued for `route` (ClaimStore::ClaimRoute) until none are left.
  void DrainReports(const std::string& route) GNOMON_EXCLUDES(reports_mu_);
  // Once its final report is answered: announces the run's end and ends it.
  void EndReported(FinishedAttempt& a, const Status& reported);
  // max_consecutive_failures: pauses the job cluster-wide when its failures reached it.
  void Breaker(const JobSpec& spec);

  static constexpr size_t kReportBatch = 128;  // final reports per ReportMany call
  // Drains of one part at most at once: a backlog (more than a batch per running drain, after
  // the backend stalled) gets more calls in flight, so that its reports reach the backend while
  // their leases hold rather than one round trip at a time behind the new claims.
  static constexpr int kMaxDrains = 4;

  EngineContext& ctx_;
  JobTable& table_;
  LeaseKeeper& lease_;
  EndedHook on_ended_;
  Mutex reports_mu_;
  // Final reports waiting to be sent, by the part of the backend that takes them (drains per
  // part, so that a part that does not answer holds back only its own reports); `drains` drain
  // tasks of the part are queued or running, 1 to kMaxDrains while the entry exists.
  struct ReportQueue {
    std::deque<std::shared_ptr<FinishedAttempt>> reports;
    int drains = 0;
  };
  std::map<std::string, ReportQueue> reports_ GNOMON_GUARDED_BY(reports_mu_);
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_RUN_REPORTER_H_

// Observer: what the scheduler reports as it works (for logs, metrics, alerts). Callbacks run on
// scheduler threads and must not block; implementations must be thread-safe.
#ifndef GNOMON_OBSERVER_H_
#define GNOMON_OBSERVER_H_

#include <string>

#include "gnomon/job.h"
#include "gnomon/time.h"

namespace gnomon {

struct SchedulerEvent {
  enum class Kind {
    kClaimed,         // this node claimed a fire (run_id, attempt, token)
    kClaimLost,       // another node had the fire (run_id)
    kSkipped,         // a fire was skipped (detail = reason: overlap, misfire, paused, early-guard,
                      // too-old)
    kRunStarted,      // an attempt started
    kRunFinished,     // an attempt finished (outcome, duration)
    kRetryScheduled,  // a retry will run at `at`
    kLeaseRenewed,
    kLeaseRenewFailed,  // detail = error
    kSelfFenced,        // this node cancelled its own run: could not renew before ttl - margin
    kLostRun,           // a vanished holder's fire was resolved (detail = fail/rerun)
    kAutoPaused,        // the job paused itself after max_consecutive_failures (an alert)
    kJobsReloaded,
    kError,  // a backend or executor error (detail)
  } kind;
  std::string job_id;
  std::string run_id;
  int attempt = 0;
  int64_t fencing_token = 0;
  RunOutcome outcome = RunOutcome::kRunning;
  Instant scheduled_at;
  Instant at;  // when it happened (wall clock)
  // kRunFinished: run duration; kRunStarted: lateness of the start (start minus the scheduled
  // instant); kClaimed: claim time minus the scheduled instant (negative for a claim ahead).
  Duration duration{0};
  std::string detail;
  std::string traceparent;  // kRunStarted, kRunFinished: the attempt's W3C trace context
  // kClaimed, kSkipped, kClaimLost: the claim was a misfire catch-up (docs/semantics.md), not an
  // on-time claim.
  bool catch_up = false;
};

std::string_view ToString(SchedulerEvent::Kind kind);

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void OnEvent(const SchedulerEvent& event) = 0;
};

}  // namespace gnomon

#endif  // GNOMON_OBSERVER_H_

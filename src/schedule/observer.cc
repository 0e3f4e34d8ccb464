#include "gnomon/observer.h"

namespace gnomon {

std::string_view ToString(SchedulerEvent::Kind kind) {
  using K = SchedulerEvent::Kind;
  switch (kind) {
    case K::kClaimed:
      return "claimed";
    case K::kClaimLost:
      return "claim_lost";
    case K::kSkipped:
      return "skipped";
    case K::kRunStarted:
      return "run_started";
    case K::kRunFinished:
      return "run_finished";
    case K::kRetryScheduled:
      return "retry_scheduled";
    case K::kLeaseRenewed:
      return "lease_renewed";
    case K::kLeaseRenewFailed:
      return "lease_renew_failed";
    case K::kSelfFenced:
      return "self_fenced";
    case K::kLostRun:
      return "lost_run";
    case K::kAutoPaused:
      return "auto_paused";
    case K::kJobsReloaded:
      return "jobs_reloaded";
    case K::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace gnomon

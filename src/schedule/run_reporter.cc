// RunReporter: a run's reports (inline, or queued for the drain) and its end.
#include "src/schedule/run_reporter.h"

#include <algorithm>

namespace gnomon::internal {

// A run that finished during a short outage is recorded with its outcome instead of being
// resolved as lost later (and, with on_lost = "rerun", run again). The backend still checks the
// lease; a retry of a report that was applied after all is refused (the fire is closed) and
// logged as an error, never recorded twice.
void RunReporter::ReportWhileHeld(const std::shared_ptr<FinishedAttempt>& a, bool final,
                                  Duration backoff, std::function<void(const Status&)> then) {
  Status s = ctx_.coord().Report(a->reporting, a->rec, final);
  if (s.ok() || s.code() != StatusCode::kUnavailable) return then(s);
  if (ctx_.clock().SteadyNow() + backoff >= lease_.FenceDeadline(*a->run) || ctx_.Stopping()) {
    return then(s);
  }
  const Duration later = std::min<Duration>(backoff * 2, std::chrono::seconds(1));
  lease_.ResumeAfter(*a->run, backoff, [this, a, final, later, then = std::move(then)] {
    ReportWhileHeld(a, final, later, then);
  });
}

void RunReporter::Finish(const std::shared_ptr<FinishedAttempt>& a, std::function<void()> then) {
  ReportWhileHeld(a, true, std::chrono::milliseconds(100),
                  [this, a, then = std::move(then)](const Status& reported) {
                    EndReported(*a, reported);
                    if (then) then();
                  });
}

void RunReporter::EndReported(FinishedAttempt& a, const Status& reported) {
  AnnounceFinished(a.fire, a.attempt, a.rec, a.took, a.traceparent);
  if (!reported.ok()) {
    ctx_.Emit(SchedulerEvent::Kind::kError, a.fire, "report: " + reported.ToString());
  }
  EndRun(*a.job, a.fire, a.run, a.rec.outcome);
  if (reported.ok() && on_ended_) on_ended_(*a.job, a.fire, a.rec);
}

void RunReporter::Queue(std::shared_ptr<FinishedAttempt> done) {
  std::string route = ctx_.coord().ClaimRoute(done->fire.job_id);
  {
    MutexLock lock(reports_mu_);
    ReportQueue& q = reports_[route];
    q.reports.push_back(std::move(done));
    if (q.drains > 0 && (q.drains >= kMaxDrains ||
                         q.reports.size() <= kReportBatch * static_cast<size_t>(q.drains))) {
      return;
    }
    ++q.drains;
  }
  // A drain dropped by a stopped pool would strand the queue: this caller drains instead.
  if (!ctx_.pool().Submit([this, route] { DrainReports(route); }, kRunLane, /*kept=*/true)) {
    DrainReports(route);
  }
}

void RunReporter::DrainReports(const std::string& route) {
  while (true) {
    std::vector<std::shared_ptr<FinishedAttempt>> batch;
    {
      MutexLock lock(reports_mu_);
      ReportQueue& part = reports_[route];
      std::deque<std::shared_ptr<FinishedAttempt>>& q = part.reports;
      if (q.empty()) {
        if (--part.drains == 0) reports_.erase(route);
        return;
      }
      const size_t n = std::min(q.size(), kReportBatch);
      batch.assign(std::make_move_iterator(q.begin()),
                   std::make_move_iterator(q.begin() + static_cast<ptrdiff_t>(n)));
      q.erase(q.begin(), q.begin() + static_cast<ptrdiff_t>(n));
    }
    std::vector<ReportRequest> reqs;
    reqs.reserve(batch.size());
    for (const auto& a : batch) reqs.push_back({&a->reporting, &a->rec, true});
    const std::vector<Status> out = ctx_.coord().ReportMany(reqs);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Status s = i < out.size() ? out[i] : InternalError("report: no answer");
      // Unreachable backend: this report retries on its own, as long as its lease may still
      // hold (ReportWhileHeld), without holding back the others.
      if (s.code() == StatusCode::kUnavailable &&
          ctx_.pool().Submit([this, a = batch[i]] { Finish(a, nullptr); }, kRunLane,
                             /*kept=*/true)) {
        continue;
      }
      EndReported(*batch[i], s);
    }
  }
}

void RunReporter::AnnounceFinished(const FireKey& fire, const Claim& attempt, const RunRecord& rec,
                                   Duration took, const std::string& traceparent) {
  if (!ctx_.observed()) return;
  SchedulerEvent finished = ctx_.MakeEvent(SchedulerEvent::Kind::kRunFinished, fire, attempt);
  finished.traceparent = traceparent;
  finished.outcome = rec.outcome;
  finished.duration = took;
  finished.detail = rec.error;
  ctx_.Notify(finished);
}

void RunReporter::EndRun(const JobSpec& spec, const FireKey& fire,
                         const std::shared_ptr<ActiveRun>& run, RunOutcome final_outcome) {
  lease_.Unregister(run);
  // The last attempt's history mark (MarkRan) goes with the end of the run, one lock less.
  table_.AdjustRunning(fire.job_id, -1, true, run->job_slot);
  if ((final_outcome == RunOutcome::kFailed || final_outcome == RunOutcome::kTimedOut) &&
      spec.max_consecutive_failures > 0) {
    Breaker(spec);
  }
}

void RunReporter::Breaker(const JobSpec& spec) {
  Result<JobState> state = ctx_.coord().GetJobState(spec.id);
  if (!state.ok() || state->paused || state->consecutive_failures < spec.max_consecutive_failures) {
    return;
  }
  if (!ctx_.coord().SetPaused(spec.id, true, "max_consecutive_failures").ok()) return;
  table_.SetPaused(spec.id, true, "max_consecutive_failures");
  SchedulerEvent ev = ctx_.MakeEvent(SchedulerEvent::Kind::kAutoPaused, FireKey{spec.id, {}, 0, 1});
  ev.detail = "paused after " + std::to_string(state->consecutive_failures) +
              " consecutive failures (max_consecutive_failures = " +
              std::to_string(spec.max_consecutive_failures) + ")";
  ctx_.Notify(ev);
}

}  // namespace gnomon::internal

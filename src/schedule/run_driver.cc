// RunDriver: a fire's run: claim, attempts, and retries as timers.
#include "src/schedule/run_driver.h"

#include <algorithm>
#include <atomic>

#include "src/schedule/claim_dispatcher.h"

namespace gnomon::internal {
namespace {

void Then(const std::function<void()>& then) {
  if (then) then();
}

}  // namespace

// One fire's run between its steps.
struct RunDriver::Run {
  SpecPtr job;
  // The job's definition with kill_grace capped at margin/2, so that a self-fenced process is
  // killed before the lease can end (copied only when the cap changes it).
  std::optional<JobSpec> capped;
  const JobSpec& spec() const { return capped ? *capped : *job; }
  FireKey fire;
  RunOptions opts;
  std::function<void()> then;
  std::shared_ptr<ActiveRun> active;
  RunOutcome last_outcome = RunOutcome::kRunning;  // of the last attempt reported
};

// Fires run one after another (RunInOrder).
struct RunDriver::Sequence {
  SpecPtr spec;
  std::vector<FireKey> fires;
  size_t next = 0;
  RunOptions opts;
};

void RunDriver::RunFire(const SpecPtr& job, const FireKey& fire, std::optional<Claim> resumed,
                        Duration claim_sent, const RunOptions& opts, std::function<void()> then) {
  Claim claim;
  if (resumed) {
    // A claim this node holds already runs also during a graceful stop (which waits for it).
    claim = *resumed;
  } else {
    if (ctx_.Stopping()) return Then(then);
    claim_sent = ctx_.clock().SteadyNow();
    ClaimRequest req = ctx_.RequestFor(*job, fire);
    req.cause = opts.cause;  // the running record says why from the start (a backfill)
    std::optional<Claim> won =
        dispatch_->AcceptClaim(*job, fire, ctx_.coord().Claim(req), opts.catch_up);
    if (!won) return Then(then);
    if (fire.scheduled_at > ctx_.Now()) {  // claimed ahead (or early, within skew_tolerance)
      dispatch_->StartClaimed(job, *won, claim_sent, fire.scheduled_at);
      return Then(then);
    }
    claim = *won;
  }
  if (ctx_.options().dispatch) {
    // Queue mode: a worker runs it (and renews and reports it from now on).
    if (Status d = ctx_.options().dispatch(*job, claim); !d.ok()) {
      ctx_.Emit(SchedulerEvent::Kind::kError, fire, "dispatch: " + d.ToString());
      (void)ctx_.coord().Report(
          claim, ctx_.NotRunRecord(claim, RunOutcome::kFailed, "dispatch: " + d.message()), true);
    }
    return Then(then);
  }
  auto r = std::make_shared<Run>();
  r->job = job;
  if (job->kill_grace > ctx_.margin() / 2) {
    r->capped.emplace(*job);
    r->capped->kill_grace = ctx_.margin() / 2;
  }
  r->fire = fire;
  r->opts = opts;
  r->then = std::move(then);
  r->active = std::make_shared<ActiveRun>();
  r->active->claim = claim;
  r->active->last_ok_sent = claim_sent;
  lease_.Register(r->active);
  r->active->job_slot = table_.AdjustRunning(fire.job_id, +1, false, opts.job_slot);
  AttemptStep(r);
}

void RunDriver::RunInOrder(const SpecPtr& spec, std::vector<FireKey> fires,
                           const RunOptions& opts) {
  auto seq = std::make_shared<Sequence>();
  seq->spec = spec;
  seq->fires = std::move(fires);
  seq->opts = opts;
  RunInOrder(seq);
}

// Runs the fires on this thread while each ends within its RunFire call; a fire that waits for
// a retry timer goes on from the step that ends it (no recursion either way).
void RunDriver::RunInOrder(const std::shared_ptr<Sequence>& seq) {
  while (seq->next < seq->fires.size()) {
    const FireKey fire = seq->fires[seq->next++];
    // 0: under way; 1: ended within the call; 2: the call returned first.
    auto state = std::make_shared<std::atomic<int>>(0);
    RunFire(seq->spec, fire, std::nullopt, ctx_.clock().SteadyNow(), seq->opts, [this, seq, state] {
      if (state->exchange(1) == 2) RunInOrder(seq);
    });
    if (state->exchange(2) == 0) return;
  }
}

void RunDriver::AttemptStep(const std::shared_ptr<Run>& r) {
  const JobSpec& spec = r->spec();
  auto done = std::make_shared<FinishedAttempt>();
  done->job = r->job;
  done->fire = r->fire;
  done->run = r->active;
  done->attempt = lease_.CurrentClaim(*r->active);
  done->rec = Attempt(spec, r->fire, done->attempt, *r->active, done->took, done->traceparent);
  const bool wants_retry =
      (done->rec.outcome == RunOutcome::kFailed || done->rec.outcome == RunOutcome::kTimedOut) &&
      done->attempt.attempt <= spec.retries && !ctx_.Stopping();
  if (!lease_.DecideRetry(*r->active, wants_retry, done->reporting)) {
    // The final report is not sent by this worker: it joins the reports queue, sent together by
    // a task queued behind the fires already waiting for a worker (QueueReport), so a worker
    // that ran an attempt does not hold back the start of the next fire. The run stays
    // registered, its lease renewed, until its report is in (EndReported).
    if (r->opts.report_inline || r->opts.catch_up) {
      reporter_.Finish(done, r->then);
    } else {
      reporter_.Queue(std::move(done));
      Then(r->then);
    }
    return;
  }
  reporter_.ReportWhileHeld(
      done, false, std::chrono::milliseconds(100), [this, r, done](const Status& reported) {
        table_.MarkRan(r->fire.job_id);
        reporter_.AnnounceFinished(r->fire, done->attempt, done->rec, done->took,
                                   done->traceparent);
        r->last_outcome = done->rec.outcome;
        if (!reported.ok()) {
          ctx_.Emit(SchedulerEvent::Kind::kError, r->fire, "report: " + reported.ToString());
          reporter_.EndRun(*r->job, r->fire, r->active, r->last_outcome);
          return Then(r->then);
        }
        // Full jitter: uniform in [0, min(cap, backoff * 2^(attempt-1))].
        const int attempt = done->attempt.attempt;
        const Duration cap = std::min<Duration>(
            kMaxRetryBackoff, r->spec().retry_backoff * (int64_t{1} << std::min(attempt - 1, 20)));
        const Duration delay = Duration(ctx_.RandomBelow(cap.count() + 1));
        SchedulerEvent ev = ctx_.MakeEvent(SchedulerEvent::Kind::kRetryScheduled, r->fire);
        ev.attempt = attempt + 1;
        ev.duration = delay;
        ctx_.Notify(ev);
        lease_.ResumeAfter(*r->active, delay, [this, r] { AfterBackoff(r); });
      });
}

void RunDriver::AfterBackoff(const std::shared_ptr<Run>& r) {
  const Claim last = lease_.CurrentClaim(*r->active);
  Result<Claim> next = ctx_.coord().NextAttempt(last, ctx_.options().lease_ttl);
  if (!next.ok()) {
    ctx_.Emit(SchedulerEvent::Kind::kError, r->fire, "next attempt: " + next.status().ToString());
    reporter_.EndRun(*r->job, r->fire, r->active, r->last_outcome);
    return Then(r->then);
  }
  next->cause = last.cause;  // the retries of a rerun are the rerun's too
  lease_.NextClaim(*r->active, *next);
  if (ctx_.Stopping()) {
    // Shutdown during the backoff: the retry is recorded as cancelled, the lease released.
    (void)ctx_.coord().Report(
        *next,
        ctx_.NotRunRecord(*next, RunOutcome::kCancelled,
                          std::string(ReasonText(StopReason::kShutdown)) + " before the retry"),
        true);
    reporter_.EndRun(*r->job, r->fire, r->active, r->last_outcome);
    return Then(r->then);
  }
  AttemptStep(r);
}

RunRecord RunDriver::Attempt(const JobSpec& spec, const FireKey& fire, const Claim& claim,
                             ActiveRun& run, Duration& took, std::string& traceparent) {
  RunRecord rec = ctx_.BaseRecord(fire, claim);
  RunContext rc;
  rc.job_id = fire.job_id;
  rc.run_id = rec.run_id;
  rc.node_id = ctx_.options().node_id;
  rc.scheduled_at = fire.scheduled_at;
  rc.fencing_token = claim.fencing_token;
  rc.attempt = claim.attempt;
  rc.shard_index = fire.shard;
  rc.shard_count = fire.shard_count;
  if (spec.timeout.count() > 0) rc.deadline = rec.started_at + spec.timeout;
  // Attempt 1 follows a fresh claim of a fire that had no record, so it has no checkpoint: only
  // later attempts (retries, re-runs after a lost lease) read it (one round trip less).
  if (Result<std::optional<std::string>> cp =
          claim.attempt > 1 ? ctx_.coord().LoadCheckpoint(fire)
                            : Result<std::optional<std::string>>(std::optional<std::string>());
      cp.ok()) {
    rc.checkpoint = *cp;
  }
  rc.traceparent = ctx_.TraceParent();
  if (!spec.params.empty()) rc.params = spec.params;
  rec.params = spec.params;
  rc.stop = run.stop.get_token();
  rc.save_checkpoint = [this, &run](const std::string& value) {
    return ctx_.coord().SaveCheckpoint(lease_.CurrentClaim(run), value);
  };
  const std::shared_ptr<LiveOutput::Tail> tail = live_output_.Open(claim);
  rc.on_output = [&tail](std::string_view text) { tail->Append(text); };
  if (spec.timeout.count() > 0) lease_.ArmTimeout(run, ctx_.clock().SteadyNow() + spec.timeout);
  if (ctx_.observed()) {
    SchedulerEvent started = ctx_.MakeEvent(SchedulerEvent::Kind::kRunStarted, fire, claim);
    started.traceparent = rc.traceparent;
    started.duration = started.at - EngineContext::DueOf(spec, fire);  // lateness
    ctx_.Notify(started);
  }
  traceparent = rc.traceparent;
  const Duration began = ctx_.clock().SteadyNow();
  ExecResult res = ctx_.exec().Execute(spec, rc);
  took = ctx_.clock().SteadyNow() - began;
  live_output_.Close(tail);
  rec.finished_at = ctx_.Now();
  rec.exit_code = res.exit_code;
  rec.output = res.output.empty() ? tail->Contents() : std::move(res.output);
  rec.error = std::move(res.error);
  rec.outcome = res.outcome;
  const StopReason reason = lease_.EndAttempt(run);
  if (reason != StopReason::kNone && rec.outcome != RunOutcome::kSucceeded) {
    rec.outcome = reason == StopReason::kTimeout ? RunOutcome::kTimedOut : RunOutcome::kCancelled;
    rec.error = std::string(ReasonText(reason)) + (rec.error.empty() ? "" : ": " + rec.error);
  }
  return rec;
}

}  // namespace gnomon::internal

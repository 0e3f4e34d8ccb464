// LeaseKeeper: the run registry, the lease watchdog and the renewer.
#include "src/schedule/lease_keeper.h"

#include <vector>

namespace gnomon::internal {

void LeaseKeeper::Start() {
  watchdog_thread_ = std::jthread([this] { Watchdog(); });
  renewer_thread_ = std::jthread([this] { Renewer(); });
}

void LeaseKeeper::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  renew_cv_.notify_all();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  if (renewer_thread_.joinable()) renewer_thread_.join();
}

void LeaseKeeper::Register(const std::shared_ptr<ActiveRun>& run) {
  MutexLock lock(mu_);
  run->next_renew = run->last_ok_sent + ctx_.options().lease_ttl / 3;
  active_[run.get()] = run;
  if (cancel_all_) {  // claimed while a shutdown was cancelling runs
    run->reason = StopReason::kShutdown;
    run->stop.request_stop();
  }
  WakeLocked(std::min(run->next_renew, FenceDeadlineLocked(*run)));
}

void LeaseKeeper::Unregister(const std::shared_ptr<ActiveRun>& run) {
  MutexLock lock(mu_);
  active_.erase(run.get());
  // A removed run moves no deadline earlier; only a graceful stop waits for the last one.
  if (active_.empty()) cv_.notify_all();
}

Claim LeaseKeeper::CurrentClaim(const ActiveRun& run) const {
  MutexLock lock(mu_);
  return run.claim;
}

Duration LeaseKeeper::FenceDeadline(const ActiveRun& run) const {
  MutexLock lock(mu_);
  return FenceDeadlineLocked(run);
}

Duration LeaseKeeper::FenceDeadlineLocked(const ActiveRun& run) const {
  return run.last_ok_sent + ctx_.options().lease_ttl - ctx_.margin();
}

void LeaseKeeper::ArmTimeout(ActiveRun& run, Duration at) {
  MutexLock lock(mu_);
  run.timeout_at = at;
  WakeLocked(at);
}

StopReason LeaseKeeper::EndAttempt(ActiveRun& run) {
  MutexLock lock(mu_);
  run.timeout_at.reset();
  return run.reason;
}

bool LeaseKeeper::DecideRetry(ActiveRun& run, bool wants_retry, Claim& claim) {
  MutexLock lock(mu_);
  const StopReason reason = run.reason;
  const bool fenced = reason == StopReason::kLeaseLost || reason == StopReason::kSelfFenced ||
                      reason == StopReason::kReplaced;
  const bool retry = wants_retry && !fenced && reason != StopReason::kShutdown;
  if (!retry) run.reporting = true;
  claim = run.claim;
  return retry;
}

void LeaseKeeper::NextClaim(ActiveRun& run, const Claim& claim) {
  MutexLock lock(mu_);
  run.claim = claim;
  run.reason = StopReason::kNone;
  run.timeout_at.reset();
}

void LeaseKeeper::ResumeAfter(ActiveRun& run, Duration delay, std::function<void()> task) {
  MutexLock lock(mu_);
  run.resume_at = ctx_.clock().SteadyNow() + delay;
  run.resume = std::move(task);
  WakeLocked(*run.resume_at);
}

void LeaseKeeper::CancelLocalRun(const FireKey& fire, StopReason reason) {
  MutexLock lock(mu_);
  for (auto& [key, run] : active_) {
    if (run->claim.fire == fire && run->reason == StopReason::kNone) {
      run->reason = reason;
      run->stop.request_stop();
    }
  }
}

void LeaseKeeper::RenewAllNow() {
  MutexLock lock(mu_);
  const Duration now = ctx_.clock().SteadyNow();
  for (auto& [key, run] : active_) run->next_renew = std::min(run->next_renew, now);
  WakeLocked();
}

void LeaseKeeper::WakeAll() {
  MutexLock lock(mu_);
  WakeLocked();
}

void LeaseKeeper::BeginStarting() {
  MutexLock lock(mu_);
  ++starting_;
}

void LeaseKeeper::EndStarting() {
  MutexLock lock(mu_);
  if (--starting_ == 0) cv_.notify_all();
}

void LeaseKeeper::WaitIdleThenCancel(Duration grace) {
  MutexLock lock(mu_);
  ctx_.clock().WaitFor(lock.native(), cv_, grace, [&] {
    mu_.AssertHeld();
    return active_.empty() && starting_ == 0;
  });
  cancel_all_ = true;
  for (auto& [key, run] : active_) {
    if (run->reason == StopReason::kNone) run->reason = StopReason::kShutdown;
    run->stop.request_stop();
  }
}

int LeaseKeeper::running() const {
  MutexLock lock(mu_);
  return static_cast<int>(active_.size());
}

void LeaseKeeper::WakeLocked() {
  ++version_;
  cv_.notify_all();
}

void LeaseKeeper::WakeLocked(Duration due) {
  if (due < due_) WakeLocked();
}

Duration LeaseKeeper::NextDueLocked() const {
  Duration due = Duration::max() / 2;
  const bool stopping = ctx_.Stopping();
  // A run whose final report is under way has nothing left to stop: it is neither renewed nor
  // self-fenced (the backend fences the report itself).
  for (const auto& [key, run] : active_) {
    if (!run->lost && !run->reporting) {
      due = std::min(due, FenceDeadlineLocked(*run));
      if (!run->renewing) due = std::min(due, run->next_renew);
    }
    if (run->timeout_at && run->reason == StopReason::kNone) due = std::min(due, *run->timeout_at);
    if (run->resume) due = std::min(due, stopping ? Duration::min() : *run->resume_at);
  }
  return due;
}

void LeaseKeeper::Watchdog() {
  MutexLock lock(mu_);
  while (!stop_) {
    const Duration due = NextDueLocked();
    if (due > ctx_.clock().SteadyNow()) {
      const uint64_t seen = version_;
      due_ = due;
      ctx_.clock().WaitUntilSteady(lock.native(), cv_, due, [&] {
        mu_.AssertHeld();
        return stop_ || version_ != seen;
      });
      // Awake (the lock may be let go below): whatever changes is seen by the next scan.
      due_ = Duration::min();
      if (stop_) return;
    }
    const Duration now = ctx_.clock().SteadyNow();
    const bool stopping = ctx_.Stopping();
    std::vector<FireKey> fenced;
    std::vector<std::function<void()>> resumes;
    bool queued = false;
    for (auto& [key, run] : active_) {
      if (run->timeout_at && now >= *run->timeout_at && run->reason == StopReason::kNone) {
        run->reason = StopReason::kTimeout;
        run->stop.request_stop();
      }
      if (!run->lost && !run->reporting && now >= FenceDeadlineLocked(*run)) {
        run->lost = true;
        if (run->reason == StopReason::kNone || run->reason == StopReason::kTimeout) {
          run->reason = StopReason::kSelfFenced;
        }
        run->stop.request_stop();
        fenced.push_back(run->claim.fire);
      }
      if (!run->lost && !run->renewing && !run->reporting && now >= run->next_renew) {
        run->renewing = true;
        renew_queue_.push_back(run);
        queued = true;
      }
      if (run->resume && (stopping || now >= *run->resume_at)) {
        resumes.push_back(std::exchange(run->resume, nullptr));
        run->resume_at.reset();
      }
    }
    if (queued) renew_cv_.notify_all();
    if (fenced.empty() && resumes.empty()) continue;
    lock.Unlock();
    for (const FireKey& f : fenced) ctx_.Emit(SchedulerEvent::Kind::kSelfFenced, f, "");
    // A resume is the end of something under way: kept, so a stop that drops the queued tasks
    // still runs it. Once the pool is shut down (the stop's last steps), it runs here.
    for (std::function<void()>& task : resumes) {
      if (!ctx_.pool().Submit(task, kRunLane, /*kept=*/true)) task();
    }
    lock.Lock();
  }
}

void LeaseKeeper::Renewer() {
  MutexLock lock(mu_);
  while (true) {
    renew_cv_.wait(lock.native(), [&] {
      mu_.AssertHeld();
      return stop_ || !renew_queue_.empty();
    });
    if (stop_) return;
    std::shared_ptr<ActiveRun> run = std::move(renew_queue_.front());
    renew_queue_.pop_front();
    Claim claim = run->claim;
    lock.Unlock();
    const Duration sent = ctx_.clock().SteadyNow();
    Status s = ctx_.coord().Renew(claim, ctx_.options().lease_ttl);
    lock.Lock();
    run->renewing = false;
    WakeLocked();
    if (run->claim.fencing_token != claim.fencing_token || run->lost || run->reporting) continue;
    if (s.ok()) {
      run->claim.lease_expires_at = claim.lease_expires_at;
      run->last_ok_sent = sent;
      run->next_renew = sent + ctx_.options().lease_ttl / 3;
    } else if (s.code() == StatusCode::kLeaseLost) {
      run->lost = true;
      if (run->reason == StopReason::kNone) run->reason = StopReason::kLeaseLost;
      run->stop.request_stop();
    } else {
      // Backend trouble: try again soon; the fence deadline still applies.
      run->next_renew = ctx_.clock().SteadyNow() +
                        std::min<Duration>(ctx_.options().lease_ttl / 10, std::chrono::seconds(1));
    }
    lock.Unlock();
    ctx_.Emit(
        s.ok() ? SchedulerEvent::Kind::kLeaseRenewed : SchedulerEvent::Kind::kLeaseRenewFailed,
        claim.fire, s.ok() ? "" : s.ToString());
    lock.Lock();
  }
}

}  // namespace gnomon::internal

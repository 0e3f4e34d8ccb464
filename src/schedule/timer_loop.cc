// TimerLoop: the timer heap and the loop thread.
#include "src/schedule/timer_loop.h"

#include <algorithm>

#include "src/schedule/claim_dispatcher.h"
#include "src/schedule/housekeeping.h"
#include "src/schedule/misfire_handler.h"

namespace gnomon::internal {

void TimerHeap::push(Timer t) {
  heap_.push_back(std::move(t));
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

Timer TimerHeap::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
  Timer t = std::move(heap_.back());
  heap_.pop_back();
  return t;
}

void TimerLoop::Wire(ClaimDispatcher& dispatch, MisfireHandler& misfire,
                     Housekeeping& housekeeping) {
  dispatch_ = &dispatch;
  misfire_ = &misfire;
  housekeeping_ = &housekeeping;
}

void TimerLoop::Start(Instant at) {
  {
    MutexLock lock(table_.mu());
    timers_.push(Timer{at, TimerKind::kHousekeeping, 0, {}});
    timers_.push(Timer{at, TimerKind::kStatePoll, 0, {}});
  }
  thread_ = std::jthread([this] { Loop(); });
}

void TimerLoop::Join() {
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TimerLoop::ScheduleNextLocked(const std::string& id, JobEntry& e,
                                   std::optional<std::optional<Instant>> known) {
  if (!e.spec->enabled) {
    e.next.reset();
  } else {
    e.next = known ? *known : table_.NextLocked(e, e.cursor);
  }
  if (e.next) {
    timers_.push(
        Timer{*e.next - ctx_.AheadOf(*e.spec), TimerKind::kFire, e.gen, FireKey{id, {}, 0, 1}});
  }
}

void TimerLoop::WakeLocked() {
  wake_ = true;
  cv_.notify_all();
}

void TimerLoop::SleepUntilLocked(MutexLock& lock, Instant at) {
  ctx_.clock().WaitUntil(lock.native(), cv_, at + ctx_.skew(), [] { return false; });
}

void TimerLoop::Loop() {
  MutexLock lock(table_.mu());
  while (!ctx_.Stopping()) {
    const Instant start = dispatch_->NextStartLocked().value_or(Instant::Max());
    const Instant due = std::min(timers_.empty() ? Instant::Max() : timers_.top().due, start);
    if (due > ctx_.Now()) {
      // Owned fires due together are claimed together: whatever was gathered goes before the
      // loop sleeps (checked here, not after the last due timer: Now() moves with the measured
      // skew, so "nothing else is due" cannot be decided there).
      dispatch_->FlushClaimBatchLocked();
      // Timers are on the backend's clock; the wait is on the node's.
      const Instant node_due = due == Instant::Max() ? due : due + ctx_.skew();
      ctx_.clock().WaitUntil(lock.native(), cv_, node_due, [&] {
        table_.mu().AssertHeld();
        return ctx_.Stopping() || wake_;
      });
      wake_ = false;
      continue;
    }
    if (dispatch_->StartDueLocked()) continue;
    HandleTimerLocked(timers_.pop());
    if (dispatch_->BatchSizeLocked() >= kClaimBatch) dispatch_->FlushClaimBatchLocked();
  }
}

void TimerLoop::HandleTimerLocked(const Timer& t) {
  const Instant now = ctx_.Now();
  const SchedulerOptions& options = ctx_.options();
  switch (t.kind) {
    case TimerKind::kHousekeeping:
      timers_.push(Timer{now + options.housekeeping_interval, TimerKind::kHousekeeping, 0, {}});
      ctx_.pool().Submit([this] { housekeeping_->Pass(); }, kControlLane);
      return;
    case TimerKind::kStatePoll:
      timers_.push(Timer{now + options.state_poll_interval, TimerKind::kStatePoll, 0, {}});
      ctx_.pool().Submit([this] { housekeeping_->PollStates(); }, kControlLane);
      return;
    case TimerKind::kTakeover: {
      // Every takeover due now goes in one batch: one FiresRecorded call for all of them.
      std::vector<std::pair<FireKey, Instant>> batch{{t.fire, t.due}};
      while (!timers_.empty() && timers_.top().kind == TimerKind::kTakeover &&
             timers_.top().due <= now) {
        Timer next = timers_.pop();
        batch.emplace_back(std::move(next.fire), next.due);
      }
      ctx_.pool().Submit([this, batch = std::move(batch)] { dispatch_->TakeOver(batch); },
                         kClaimLane);
      return;
    }
    case TimerKind::kClaimRetry:
      if (JobEntry* e = table_.FindLocked(t.fire.job_id)) dispatch_->SubmitFire(e->spec, t.fire);
      return;
    case TimerKind::kFire:
      if (JobEntry* e = table_.FindLocked(t.fire.job_id); e && t.gen == e->gen) {
        HandleFireLocked(t, *e);  // (a stale generation was superseded by a change of the job)
      }
      return;
  }
}

void TimerLoop::HandleFireLocked(const Timer& t, JobEntry& e) {
  const Instant now = ctx_.Now();
  // Every fire in (cursor, now]: on-time ones are claimed, older ones are misfires (this node
  // stalled, or its clock stepped forward).
  // (Scratch vectors kept between timers: most timers have one fire and no misfire.)
  std::vector<Instant>& missed = missed_scratch_;
  std::vector<Instant>& on_time = on_time_scratch_;
  missed.clear();
  on_time.clear();
  // With sharded ownership the other nodes take over a fire up to (nodes - 1) takeover delays
  // after its instant: a late owner still claims within that, rather than recording a misfire
  // for a fire a peer may be running (the claims decide who runs it).
  const Duration grace = table_.TakeoverWindowLocked();
  // The first fire after the last one handled, once the loop ends without a break: the next
  // timer's instant, Next(cursor).
  std::optional<std::optional<Instant>> next;
  const Instant horizon = now + ctx_.AheadOf(*e.spec);  // fires up to here are claimed now
  for (std::optional<Instant> f = table_.NextLocked(e, e.cursor);; f = table_.NextLocked(e, *f)) {
    if (!f || *f > horizon) {
      next = f;
      break;
    }
    if (missed.size() + on_time.size() == kMaxMisfires) {
      // A long stall of a high-frequency job: the latest fire stands for the rest.
      f = e.expr->Prev(now + Duration(1));
    }
    (*f < now - grace ? missed : on_time).push_back(*f);
    e.cursor = *f;
    if (missed.size() + on_time.size() > kMaxMisfires) break;
  }
  misfire_->ApplyLocked(e, missed, now);
  for (Instant f : on_time) dispatch_->SubmitOwnedLocked(e.spec, f);
  ScheduleNextLocked(t.fire.job_id, e, next);
}

}  // namespace gnomon::internal

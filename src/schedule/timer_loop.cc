// TimerLoop: the timer heap and the loop thread.
#include "src/schedule/timer_loop.h"

#include <algorithm>

#include "src/schedule/claim_dispatcher.h"
#include "src/schedule/housekeeping.h"
#include "src/schedule/misfire_handler.h"

namespace gnomon::internal {

void TimerHeap::push(Timer t) {
  uint32_t fire = kNoFire;
  if (t.kind == TimerKind::kDelayedFire || t.kind == TimerKind::kClaimRetry ||
      t.kind == TimerKind::kTakeover) {
    if (free_fires_.empty()) {
      fire = static_cast<uint32_t>(fires_.size());
      fires_.push_back(std::move(t.fire));
    } else {
      fire = free_fires_.back();
      free_fires_.pop_back();
      fires_[fire] = std::move(t.fire);
    }
  }
  heap_.push_back(Entry{t.due, t.gen, t.slot, fire, t.kind});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

Timer TimerHeap::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
  const Entry e = heap_.back();
  heap_.pop_back();
  Timer t{e.due, e.kind, e.gen, {}, e.slot};
  if (e.fire != kNoFire) {
    t.fire = std::move(fires_[e.fire]);
    free_fires_.push_back(e.fire);
    if (free_fires_.size() == fires_.size()) {
      fires_.clear();
      free_fires_.clear();
    }
  }
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

void TimerLoop::ScheduleNextLocked(JobEntry& e, std::optional<std::optional<Instant>> known) {
  if (!e.spec->enabled) {
    e.next.reset();
  } else {
    e.next = known ? *known : table_.NextLocked(e, e.cursor);
  }
  std::optional<Instant> wake;
  if (e.next) wake = *e.next - ctx_.AheadOf(*e.spec);
  // A job that records its excluded instants wakes at each of them too: HandleFireLocked records
  // it and moves the cursor past it (one timer per job still).
  if (const FireRules* rules = e.rules.get();
      rules && FireRulesOf(*e.spec).record_excluded && e.spec->enabled) {
    const Instant after =
        rules->first() ? std::max(e.cursor, *rules->first() - Duration(1)) : e.cursor;
    if (std::optional<Instant> raw = e.expr->Next(after);
        raw && (!rules->last() || *raw <= *rules->last()) && (!wake || *raw < *wake)) {
      wake = raw;
    }
  }
  if (wake) timers_.push(Timer{*wake, TimerKind::kFire, e.gen, {}, e.slot});
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
    const Instant due = std::min(timers_.empty() ? Instant::Max() : timers_.top_due(), start);
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
      while (!timers_.empty() && timers_.top_kind() == TimerKind::kTakeover &&
             timers_.top_due() <= now) {
        Timer next = timers_.pop();
        batch.emplace_back(std::move(next.fire), next.due);
      }
      ctx_.pool().Submit([this, batch = std::move(batch)] { dispatch_->TakeOver(batch); },
                         kClaimLane);
      return;
    }
    case TimerKind::kClaimRetry: {
      JobEntry* e = table_.FindLocked(t.fire.job_id);
      if (dispatch_->RetryNowLocked(t.fire, e != nullptr) && e)
        dispatch_->SubmitFire(e->spec, t.fire);
      return;
    }
    case TimerKind::kFire:
      // (A stale generation was superseded by a change of the job, or the job was removed.)
      if (JobEntry* e = table_.AtLocked(t.slot, t.gen)) HandleFireLocked(*e);
      return;
    case TimerKind::kDelayedFire: {
      // The job as it is now, changed since or not.
      JobEntry* e = table_.AtLocked(t.slot, t.gen);
      if (e == nullptr) e = table_.FindLocked(t.fire.job_id);
      if (e && e->spec->enabled) HandleDelayedLocked(t, *e);
      return;
    }
  }
}

void TimerLoop::HandleFireLocked(JobEntry& e) {
  const std::string& id = e.spec->id;
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
  std::vector<Instant> excluded;                        // (record_excluded)
  for (std::optional<Instant> f = table_.NextLocked(e, e.cursor);; f = table_.NextLocked(e, *f)) {
    CollectExcludedLocked(e, e.cursor, f && *f <= horizon ? *f : horizon, excluded);
    if (!f || *f > horizon) {
      next = f;
      break;
    }
    if (missed.size() + on_time.size() == kMaxMisfires) {
      // A long stall of a high-frequency job: the latest fire stands for the rest.
      if (std::optional<Instant> latest = JobTable::PrevOf(e, now + Duration(1));
          latest && *latest > *f) {
        f = latest;
      }
    }
    // Claim and misfire windows count from when the fire is due (its jitter offset later).
    if (const Instant due = DueAt(*e.spec, *f); due <= e.catchup_until) {
      // (due before the job was installed: the catch-up pass's business)
    } else if (due > horizon) {
      PushLocked(Timer{due - ctx_.AheadOf(*e.spec), TimerKind::kDelayedFire, e.gen,
                       FireKey{id, *f, 0, 1}, e.slot});
    } else {
      (due < now - grace ? missed : on_time).push_back(*f);
    }
    e.cursor = *f;
    if (missed.size() + on_time.size() > kMaxMisfires) break;
  }
  if (e.catchup_pending && (!missed.empty() || !on_time.empty())) {
    misfire_->HoldLocked(e, missed, on_time);  // (its claims wait for its catch-up read)
  } else {
    misfire_->ApplyLocked(e, missed, now);
    for (Instant f : on_time) dispatch_->SubmitOwnedLocked(e.spec, f, e.slot);
  }
  // The owner records the excluded instants (a write that fails is retried by housekeeping); the
  // cursor moves past them (no allowed fire lies between).
  if (!excluded.empty()) {
    e.cursor = std::max(e.cursor, excluded.back());
    if (table_.RankLocked(id, 0) == 0) {
      misfire_->SubmitSkipRecords(e.spec, excluded, "excluded");
    }
  }
  ScheduleNextLocked(e, next);
}

void TimerLoop::CollectExcludedLocked(const JobEntry& e, Instant after, Instant until,
                                      std::vector<Instant>& out) {
  const FireRules* rules = e.rules.get();
  if (rules == nullptr || !FireRulesOf(*e.spec).record_excluded) return;
  if (rules->first()) after = std::max(after, *rules->first() - Duration(1));
  if (rules->last()) until = std::min(until, *rules->last());
  for (std::optional<Instant> t = e.expr->Next(after);
       t && *t <= until && out.size() < kMaxMisfires; t = e.expr->Next(*t)) {
    if (rules->Excluded(*t)) out.push_back(*t);
  }
}

void TimerLoop::HandleDelayedLocked(const Timer& t, JobEntry& e) {
  const Instant f = t.fire.scheduled_at;
  if (t.gen != e.gen && table_.NextLocked(e, f - Duration(1)) != f) return;  // no longer a fire
  const Instant now = ctx_.Now();
  const Instant due = DueAt(*e.spec, f);
  if (due - ctx_.AheadOf(*e.spec) > now) {  // the job's jitter grew since
    PushLocked(Timer{due - ctx_.AheadOf(*e.spec), TimerKind::kDelayedFire, e.gen, t.fire, e.slot});
    return;
  }
  if (e.catchup_pending) {
    misfire_->HoldLocked(e, {}, {f});
  } else if (due < now - table_.TakeoverWindowLocked()) {
    misfire_->ApplyLocked(e, {f}, now);
  } else {
    dispatch_->SubmitOwnedLocked(e.spec, f, e.slot);
  }
}

}  // namespace gnomon::internal

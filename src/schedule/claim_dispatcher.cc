// ClaimDispatcher: claim batches, takeovers, claim answers and the start of claimed fires.
#include "src/schedule/claim_dispatcher.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "src/schedule/lease_keeper.h"
#include "src/schedule/misfire_handler.h"
#include "src/schedule/run_driver.h"
#include "src/schedule/timer_loop.h"

namespace gnomon::internal {

void ClaimDispatcher::SubmitOwnedLocked(const SpecPtr& spec, Instant scheduled_at,
                                        uint32_t job_slot) {
  for (int s = 0; s < spec->shards; ++s) {
    FireKey fire{spec->id, scheduled_at, s, spec->shards};
    const int rank = table_.RankLocked(spec->id, s);
    if (rank == 0) {
      // Claimed together (the loop flushes the batch).
      claim_batch_.push_back(Pending{spec, std::move(fire), Claiming::kOnTime, job_slot});
    } else {
      loop_.PushLocked(Timer{DueAt(*spec, scheduled_at) + ctx_.options().takeover_delay * rank,
                             TimerKind::kTakeover, 0, std::move(fire)});
    }
  }
}

void ClaimDispatcher::SubmitHeldLocked(const SpecPtr& spec, Instant scheduled_at) {
  SubmitOwnedLocked(spec, scheduled_at);
  loop_.WakeLocked();
}

// Gathered by a housekeeping pass or a catch-up step (worker threads) as well as by the loop:
// the loop is woken to flush them.
void ClaimDispatcher::SubmitRetryLocked(const SpecPtr& spec, Instant scheduled_at) {
  for (int s = 0; s < spec->shards; ++s) {
    claim_batch_.push_back(Pending{spec, FireKey{spec->id, scheduled_at, s, spec->shards}});
  }
  loop_.WakeLocked();
}

void ClaimDispatcher::SubmitCatchUpLocked(const SpecPtr& spec, Instant scheduled_at, bool once) {
  for (int s = 0; s < spec->shards; ++s) {
    claim_batch_.push_back(Pending{spec, FireKey{spec->id, scheduled_at, s, spec->shards},
                                   once ? Claiming::kCatchUpOnce : Claiming::kCatchUp});
  }
  loop_.WakeLocked();
}

void ClaimDispatcher::FlushClaimBatchLocked() {
  if (claim_batch_.empty()) return;
  SubmitBatches(std::move(claim_batch_));
  claim_batch_.clear();
}

// A part that does not answer holds back only its own jobs' fires.
void ClaimDispatcher::SubmitBatches(std::vector<Pending> fires) {
  std::vector<std::pair<std::string, std::vector<Pending>>> parts;
  for (Pending& fire : fires) {
    std::string route = ctx_.coord().ClaimRoute(fire.spec->id);
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const auto& part) { return part.first == route; });
    if (it == parts.end()) it = parts.insert(parts.end(), {std::move(route), {}});
    it->second.push_back(std::move(fire));
  }
  // (A housekeeping pass after an outage may gather a failed claim of every job: at most
  // kClaimBatch fires go in one call, as the loop gathers them.)
  for (auto& [route, part] : parts) {
    for (size_t at = 0; at < part.size(); at += TimerLoop::kClaimBatch) {
      const auto from = part.begin() + static_cast<std::ptrdiff_t>(at);
      const auto to = part.begin() + static_cast<std::ptrdiff_t>(
                                         std::min(part.size(), at + TimerLoop::kClaimBatch));
      ctx_.pool().Submit(
          [this, batch = std::vector<Pending>(std::make_move_iterator(from),
                                              std::make_move_iterator(to))]() mutable {
            ClaimBatch(std::move(batch));
          },
          kClaimLane);
    }
  }
}

std::optional<Instant> ClaimDispatcher::NextStartLocked() const {
  if (start_at_.empty()) return std::nullopt;
  return start_at_.top().first;
}

bool ClaimDispatcher::StartDueLocked() {
  if (start_at_.empty() || start_at_.top().first > ctx_.Now()) return false;
  SubmitStartLocked(start_at_.top().second);
  start_at_.pop();
  return true;
}

void ClaimDispatcher::TakeOver(const std::vector<std::pair<FireKey, Instant>>& due) {
  std::vector<FireKey> fires;
  for (const auto& [fire, at] : due) fires.push_back(fire);
  Result<std::vector<bool>> recorded = ctx_.coord().FiresRecorded(fires);
  std::vector<Pending> claim;
  for (size_t i = 0; i < fires.size(); ++i) {
    if (recorded.ok() && i < recorded->size() && (*recorded)[i]) continue;
    SpecPtr spec = table_.Spec(fires[i].job_id);
    if (!spec || spec->shards != fires[i].shard_count) continue;  // removed or changed since
    {
      // Late (the check itself was slow: a hung backend), the fire is a misfire: it goes to the
      // failed claims, which the job's owner handles per `misfire`, rather than being claimed
      // late beside the owner's catch-up. Measured from this node's own turn, not from the live
      // set's window now: that shrinks when heartbeats lapse in an outage.
      MutexLock lock(table_.mu());
      if (ctx_.Now() - due[i].second > ctx_.options().claim_grace) {
        table_.KeepFailedLocked(fires[i]);
        continue;
      }
    }
    claim.push_back(Pending{std::move(spec), fires[i]});
  }
  if (!claim.empty()) SubmitBatches(std::move(claim));
}

void ClaimDispatcher::SubmitFire(const SpecPtr& spec, const FireKey& fire) {
  ctx_.pool().Submit(
      [this, spec, fire] {
        driver_.RunFire(spec, fire, std::nullopt, ctx_.clock().SteadyNow(), {}, nullptr);
      },
      kClaimLane);
}

void ClaimDispatcher::SubmitShards(const SpecPtr& spec, Instant scheduled_at) {
  for (int s = 0; s < spec->shards; ++s) {
    SubmitFire(spec, FireKey{spec->id, scheduled_at, s, spec->shards});
  }
}

void ClaimDispatcher::Buffer(const JobSpec& spec, const FireKey& fire) {
  // The oldest fires wait (buffer_one: one; buffer_all: kMaxBufferedFires), whichever order their
  // busy answers came in; a newer one beyond that is recorded skipped.
  std::vector<FireKey> skipped;
  {
    MutexLock lock(table_.mu());
    auto [it, inserted] = waiting_.try_emplace(fire.job_id);
    if (inserted) waiting_jobs_.fetch_add(1, std::memory_order_relaxed);
    std::set<Instant>& waiting = it->second;
    const size_t keep = spec.overlap == OverlapPolicy::kBufferOne ? 1 : kMaxBufferedFires;
    const bool waits = waiting.count(fire.scheduled_at) > 0;
    if (!waits && waiting.size() >= keep && *waiting.rbegin() > fire.scheduled_at) {
      // A newer fire holds the last place: it gives it up (its retry timer then finds it
      // recorded), and this one waits.
      const Instant newest = *waiting.rbegin();
      waiting.erase(std::prev(waiting.end()));
      for (int s = 0; s < fire.shard_count; ++s) {
        skipped.push_back(FireKey{fire.job_id, newest, s, fire.shard_count});
      }
    }
    if (waits || waiting.size() < keep) {
      waiting.insert(fire.scheduled_at);
      loop_.PushLocked(Timer{ctx_.Now() + kBufferRetry, TimerKind::kClaimRetry, 0, fire});
      loop_.WakeLocked();
    } else {
      skipped.push_back(fire);
    }
  }
  for (const FireKey& f : skipped) {
    Status s = ctx_.coord().RecordSkipped(f, ctx_.options().node_id, "overlap");
    if (s.ok()) {
      ctx_.Emit(SchedulerEvent::Kind::kSkipped, f, "overlap");
    } else if (s.code() != StatusCode::kAlreadyExists) {
      ctx_.Emit(SchedulerEvent::Kind::kError, f, "record skipped: " + s.ToString());
    }
  }
}

bool ClaimDispatcher::RetryNowLocked(const FireKey& fire, bool job_defined) {
  auto it = waiting_.find(fire.job_id);
  if (it == waiting_.end() || !it->second.count(fire.scheduled_at)) return true;
  if (!job_defined) {
    waiting_.erase(it);
    waiting_jobs_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  if (*it->second.begin() == fire.scheduled_at) return true;
  loop_.PushLocked(Timer{ctx_.Now() + kBufferRetry, TimerKind::kClaimRetry, 0, fire});
  return false;
}

std::optional<Claim> ClaimDispatcher::AcceptClaim(const JobSpec& spec, const FireKey& fire,
                                                  const Result<ClaimOutcome>& out, bool catch_up) {
  // Events of a catch-up's claim say so (SchedulerEvent::catch_up).
  auto emit = [&](SchedulerEvent::Kind kind, std::string detail) {
    if (!ctx_.observed()) return;
    SchedulerEvent ev = ctx_.MakeEvent(kind, fire);
    ev.detail = std::move(detail);
    ev.catch_up = catch_up;
    ctx_.Notify(ev);
  };
  // Any answer but busy ends a fire's wait (an error hands it to the failed claims below).
  if ((!out.ok() || out->result != ClaimOutcome::Result::kBusy) &&
      waiting_jobs_.load(std::memory_order_relaxed) > 0) {
    MutexLock lock(table_.mu());
    if (auto it = waiting_.find(fire.job_id); it != waiting_.end()) {
      it->second.erase(fire.scheduled_at);
      if (it->second.empty()) {
        waiting_.erase(it);
        waiting_jobs_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }
  if (out.ok() && !catch_up && table_.RetriesAwaited()) {
    const ClaimOutcome::Result r = out->result;
    if (r != ClaimOutcome::Result::kBusy && r != ClaimOutcome::Result::kTooEarly) {
      MutexLock lock(table_.mu());
      table_.SettleRetryLocked(fire, r == ClaimOutcome::Result::kAlreadyClaimed);
    }
  }
  if (!out.ok()) {
    emit(SchedulerEvent::Kind::kError, "claim: " + out.status().ToString());
    MutexLock lock(table_.mu());
    table_.KeepFailedLocked(fire);
    return std::nullopt;
  }
  switch (out->result) {
    case ClaimOutcome::Result::kClaimed:
      break;
    case ClaimOutcome::Result::kBusy:
      Buffer(spec, fire);
      return std::nullopt;
    case ClaimOutcome::Result::kAlreadyClaimed:
      emit(SchedulerEvent::Kind::kClaimLost, "");
      return std::nullopt;
    case ClaimOutcome::Result::kOverlap:
      emit(SchedulerEvent::Kind::kSkipped, "overlap");
      return std::nullopt;
    case ClaimOutcome::Result::kPaused:
      emit(SchedulerEvent::Kind::kSkipped, "paused");
      return std::nullopt;
    case ClaimOutcome::Result::kTooOld:
      // Older than the backend keeps fire markers (a catch-up beyond it, or this node was
      // paused that long): it may have run, so it is neither run nor recorded (a warning).
      emit(SchedulerEvent::Kind::kSkipped, "too-old");
      return std::nullopt;
    case ClaimOutcome::Result::kTooEarly: {
      // Our clock is ahead of the backend's: try again when the backend reaches the instant.
      emit(SchedulerEvent::Kind::kSkipped, "early-guard");
      const Duration wait = std::max(
          Duration(10), fire.scheduled_at - ctx_.options().skew_tolerance - out->backend_now);
      MutexLock lock(table_.mu());
      loop_.PushLocked(Timer{ctx_.Now() + wait, TimerKind::kClaimRetry, 0, fire});
      loop_.WakeLocked();
      return std::nullopt;
    }
  }
  const Claim claim = *out->claim;
  for (const FireKey& old : out->replaced) lease_.CancelLocalRun(old, StopReason::kReplaced);
  if (ctx_.observed()) {
    SchedulerEvent ev = ctx_.MakeEvent(SchedulerEvent::Kind::kClaimed, fire);
    ev.attempt = claim.attempt;
    ev.fencing_token = claim.fencing_token;
    ev.duration = ev.at - EngineContext::DueOf(spec, fire);  // lateness
    ev.catch_up = catch_up;
    ctx_.Notify(ev);
  }
  if (ctx_.options().admit) {
    if (const std::string why = ctx_.options().admit(spec, claim); !why.empty()) {
      RunRecord skipped = ctx_.BaseRecord(fire, claim);
      skipped.outcome = RunOutcome::kSkipped;
      skipped.skip_reason = why;
      skipped.finished_at = ctx_.Now();
      if (Status s = ctx_.coord().Report(claim, skipped, true); !s.ok()) {
        ctx_.Emit(SchedulerEvent::Kind::kError, fire, "report: " + s.ToString());
      }
      ctx_.Emit(SchedulerEvent::Kind::kSkipped, fire, why.substr(0, why.find(':')));
      return std::nullopt;
    }
  }
  return claim;
}

// An on-time fire whose batch waited past the takeover window for a worker (the node is
// overloaded: more fires are due than the backend claims) is no longer on time: it goes to its
// job's failed claims, which housekeeping hands to the misfire policy, as a late takeover's do.
// A catch-up is late by definition and is claimed whenever its batch runs.
void ClaimDispatcher::ClaimBatch(std::vector<Pending> batch) {
  if (ctx_.Stopping()) return;
  {
    MutexLock lock(table_.mu());
    const Instant late = ctx_.Now() - table_.TakeoverWindowLocked();
    std::erase_if(batch, [&](const Pending& p) {
      table_.mu().AssertHeld();
      if (p.why != Claiming::kOnTime || DueAt(*p.spec, p.fire.scheduled_at) >= late) return false;
      table_.KeepFailedLocked(p.fire);
      return true;
    });
  }
  if (batch.empty()) return;
  // A job's on-time fire is claimed before an older fire's catch-up in the same batch: under
  // overlap = forbid the newer fire runs and the catch-up is recorded skipped, as when the
  // catch-up is claimed on its own after the batch.
  std::stable_partition(batch.begin(), batch.end(),
                        [](const Pending& p) { return p.why == Claiming::kOnTime; });
  std::vector<ClaimRequest> reqs;
  reqs.reserve(batch.size());
  for (const Pending& p : batch) reqs.push_back(ctx_.RequestFor(*p.spec, p.fire));
  const Duration sent = ctx_.clock().SteadyNow();
  std::vector<Result<ClaimOutcome>> outs = ctx_.coord().ClaimMany(reqs);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& [spec, fire, why, job_slot] = batch[i];
    const Result<ClaimOutcome> out =
        i < outs.size() ? std::move(outs[i]) : Result<ClaimOutcome>(InternalError("no answer"));
    if (std::optional<Claim> won = AcceptClaim(*spec, fire, out, why != Claiming::kOnTime)) {
      StartClaimed(spec, *won, sent, DueAt(*spec, fire.scheduled_at), job_slot);
    } else if (why == Claiming::kCatchUpOnce && fire.shard == 0 && out.ok() &&
               out->result == ClaimOutcome::Result::kAlreadyClaimed &&
               ctx_.coord().ClaimsMayBeWithdrawn()) {
      misfire_->Recheck(spec, fire.scheduled_at);
    }
  }
}

// Until its run starts a claimed fire is listed in unstarted_: a graceful stop starts it too
// (the claim is this node's; no other node may run the fire), and one the stop could not start
// within shutdown_grace is recorded cancelled and its lease released, not left to expire.
void ClaimDispatcher::StartClaimed(const SpecPtr& spec, const Claim& claim, Duration sent,
                                   Instant start, uint32_t job_slot) {
  lease_.BeginStarting();
  MutexLock lock(table_.mu());
  const uint64_t id = ++unstarted_seq_;
  unstarted_.emplace(id, Unstarted{spec, claim, sent, job_slot});
  if (start <= ctx_.Now()) {
    SubmitStartLocked(id);
    return;
  }
  start_at_.emplace(start, id);
  if (start_at_.top().second == id) loop_.WakeLocked();  // earlier than what the loop waits for
}

void ClaimDispatcher::SubmitStartLocked(uint64_t id) {
  ctx_.pool().Submit(
      [this, id] {
        std::optional<Unstarted> u;
        {
          MutexLock lock(table_.mu());
          auto it = unstarted_.find(id);
          if (it == unstarted_.end()) return;  // recorded cancelled by Stop
          u = std::move(it->second);
          unstarted_.erase(it);
        }
        driver_.RunFire(u->spec, u->claim.fire, u->claim, u->sent,
                        RunOptions{.job_slot = u->job_slot}, [this] { lease_.EndStarting(); });
      },
      kRunLane);
}

void ClaimDispatcher::StartClaimedAhead() {
  MutexLock lock(table_.mu());
  while (!start_at_.empty()) {
    const auto [at, id] = start_at_.top();
    if (at > ctx_.Now()) {
      loop_.SleepUntilLocked(lock, at);
      continue;
    }
    SubmitStartLocked(id);
    start_at_.pop();
  }
}

void ClaimDispatcher::RecordUnstarted() {
  std::vector<Unstarted> left;
  {
    MutexLock lock(table_.mu());
    for (auto& [id, u] : unstarted_) left.push_back(std::move(u));
    unstarted_.clear();
  }
  for (const Unstarted& u : left) {
    const RunRecord rec = ctx_.NotRunRecord(
        u.claim, RunOutcome::kCancelled,
        std::string(ReasonText(StopReason::kShutdown)) + " before the run started");
    if (Status s = ctx_.coord().Report(u.claim, rec, true); !s.ok()) {
      ctx_.Emit(SchedulerEvent::Kind::kError, u.claim.fire, "report: " + s.ToString());
    }
  }
}

}  // namespace gnomon::internal

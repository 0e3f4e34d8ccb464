#include "src/coord/fire_ledger.h"

#include "src/coord/coordinator_util.h"

namespace gnomon::coord {

Status LedgerTxn::Prefetch(const FireKey&, int, bool, bool) { return Status::Ok(); }

Result<int> LedgerTxn::LastAttempt(const FireEntry& fire) { return fire.attempt; }

Status StoreRenewal(gnomon::Claim& claim, const Result<Instant>& expires) {
  if (!expires.ok()) return expires.status();
  claim.lease_expires_at = *expires;
  return Status::Ok();
}

Result<FireEntry> FireLedger::Fenced(const gnomon::Claim& claim, Instant now) {
  Result<std::optional<FireEntry>> loaded = txn_.LoadFire(claim.fire, claim.attempt);
  if (!loaded.ok()) return loaded.status();
  const std::string what =
      claim.fire.RunId() + " (token " + std::to_string(claim.fencing_token) + ")";
  if (!loaded->has_value()) return LeaseLostError(what + ": the fire has no claim");
  const FireEntry& fire = **loaded;
  if (!fire.open) return LeaseLostError(what + ": the lease was released or revoked");
  if (fire.attempt != claim.attempt || fire.fencing_token != claim.fencing_token) {
    return LeaseLostError(what + ": fenced off by attempt " + std::to_string(fire.attempt) +
                          " (token " + std::to_string(fire.fencing_token) + ")");
  }
  if (!fire.backend_lease) return LeaseLostError(what + ": its backend lease ended");
  if (fire.lease_expires_at <= now) return LeaseLostError(what + ": the lease expired");
  return fire;
}

Status FireLedger::AdvanceLastScheduled(const FireKey& fire, JobState state) {
  if (!state.last_scheduled || *state.last_scheduled < fire.scheduled_at) {
    state.last_scheduled = fire.scheduled_at;
  }
  return txn_.PutJobState(fire.job_id, state);
}

Status FireLedger::Skip(const FireKey& fire, const std::string& node_id, const std::string& reason,
                        Instant now, JobState state) {
  GNOMON_RETURN_IF_ERROR(txn_.CreateFire(fire, node_id, now));
  RunRecord record = NewRecord(fire, 1, 0, node_id, now, RunOutcome::kSkipped);
  record.skip_reason = reason;
  GNOMON_RETURN_IF_ERROR(txn_.PutRecord(record));
  return AdvanceLastScheduled(fire, std::move(state));
}

Status FireLedger::FinishRunning(const FireEntry& fire, RunOutcome outcome,
                                 const std::string& error, Instant now) {
  Result<std::optional<RunRecord>> record = txn_.LoadRecord(fire.key, fire.attempt);
  if (!record.ok()) return record.status();
  if (!record->has_value() || (*record)->outcome != RunOutcome::kRunning) return Status::Ok();
  RunRecord& r = **record;
  r.outcome = outcome;
  r.finished_at = now;
  r.error = error;
  return txn_.PutRecord(r);
}

Status FireLedger::AddFailure(const std::string& job_id, RunOutcome outcome) {
  const FailureEffect effect = FailureEffectOf(outcome);
  if (effect == FailureEffect::kUnchanged) return Status::Ok();
  Result<JobState> state = txn_.LoadJobState(job_id);
  if (!state.ok()) return state.status();
  state->consecutive_failures =
      effect == FailureEffect::kReset ? 0 : state->consecutive_failures + 1;
  return txn_.PutJobState(job_id, *state);
}

Result<ClaimOutcome> FireLedger::Claim(const ClaimRequest& req) {
  GNOMON_RETURN_IF_ERROR(ValidateClaimRequest(req));
  using R = ClaimOutcome::Result;
  const FireKey& fire = req.fire;
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(fire, 0, true, req.overlap != OverlapPolicy::kAllow));
  const Instant now = txn_.Now();
  Result<std::optional<FireEntry>> existing = txn_.LoadFire(fire, 0);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return MakeOutcome(R::kAlreadyClaimed, now);
  if (fire.scheduled_at > now + req.skew_tolerance) return MakeOutcome(R::kTooEarly, now);
  // A fire older than the job's pruned markers: had it run, its marker is gone, so a claim could
  // run it a second time. A backfill (a claim with a cause) is held to it as well.
  Result<std::optional<Instant>> pruned = txn_.MarkersPrunedBefore(fire.job_id);
  if (!pruned.ok()) return pruned.status();
  if (*pruned && fire.scheduled_at < **pruned) return MakeOutcome(R::kTooOld, now);
  Result<JobState> state = txn_.LoadJobState(fire.job_id);
  if (!state.ok()) return state.status();
  if (state->paused) {
    GNOMON_RETURN_IF_ERROR(Skip(fire, req.node_id, "paused", now, *state));
    return MakeOutcome(R::kPaused, now);
  }
  ClaimOutcome out = MakeOutcome(R::kClaimed, now);
  if (req.overlap != OverlapPolicy::kAllow) {
    // Live fires of the same job at other instants (sibling shards of this instant run together).
    Result<std::vector<FireEntry>> live = txn_.LiveFires(fire, now);
    if (!live.ok()) return live.status();
    if (!live->empty() && IsBuffered(req.overlap)) return MakeOutcome(R::kBusy, now);
    if (!live->empty() && req.overlap == OverlapPolicy::kForbid) {
      GNOMON_RETURN_IF_ERROR(Skip(fire, req.node_id, "overlap", now, *state));
      return MakeOutcome(R::kOverlap, now);
    }
    for (const FireEntry& other : *live) {
      GNOMON_RETURN_IF_ERROR(
          FinishRunning(other, RunOutcome::kCancelled, "replaced by " + fire.RunId(), now));
      GNOMON_RETURN_IF_ERROR(txn_.CloseFire(other));
      out.replaced.push_back(other.key);
    }
  }
  GNOMON_RETURN_IF_ERROR(txn_.CreateFire(fire, req.node_id, now));
  Result<gnomon::Claim> claim =
      txn_.StartAttempt(fire, 1, req.node_id, req.lease_ttl, now, req.cause);
  if (!claim.ok()) return claim.status();
  out.claim = std::move(*claim);
  out.claim->cause = req.cause;
  GNOMON_RETURN_IF_ERROR(AdvanceLastScheduled(fire, *state));
  return out;
}

Result<Instant> FireLedger::Renew(const gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateTtl(ttl, "renew: ttl"));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(claim.fire, claim.attempt, false, false));
  const Instant now = txn_.Now();
  Result<FireEntry> fire = Fenced(claim, now);
  if (!fire.ok()) return fire.status();
  GNOMON_RETURN_IF_ERROR(txn_.ExtendLease(*fire, ttl, now));
  return now + ttl;
}

Result<gnomon::Claim> FireLedger::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateTtl(ttl, "next attempt: ttl"));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(claim.fire, claim.attempt, false, false));
  const Instant now = txn_.Now();
  Result<FireEntry> fire = Fenced(claim, now);
  if (!fire.ok()) return fire.status();
  GNOMON_RETURN_IF_ERROR(FinishRunning(
      *fire, RunOutcome::kFailed,
      "superseded by attempt " + std::to_string(fire->attempt + 1) + " without a report", now));
  return txn_.StartAttempt(fire->key, fire->attempt + 1, claim.node_id, ttl, now, "");
}

Status FireLedger::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  GNOMON_RETURN_IF_ERROR(ValidateReport(claim, record, final));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(claim.fire, claim.attempt, final, false));
  Result<FireEntry> fire = Fenced(claim, txn_.Now());
  if (!fire.ok()) return fire.status();
  RunRecord stored = record;
  stored.output = TruncateOutput(std::move(stored.output));
  GNOMON_RETURN_IF_ERROR(txn_.PutRecord(stored));
  if (!final) return Status::Ok();
  GNOMON_RETURN_IF_ERROR(txn_.CloseFire(*fire));
  return AddFailure(claim.fire.job_id, record.outcome);
}

Result<std::optional<gnomon::Claim>> FireLedger::ResolveLost(const ExpiredFire& expired,
                                                             const std::string& node_id,
                                                             LostPolicy policy, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateResolveLost(expired, node_id, policy, ttl));
  GNOMON_RETURN_IF_ERROR(
      txn_.Prefetch(expired.fire, expired.attempt, policy == LostPolicy::kFail, false));
  const Instant now = txn_.Now();
  Result<std::optional<FireEntry>> loaded = txn_.LoadFire(expired.fire, expired.attempt);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) {
    return NotFoundError("fire " + expired.fire.RunId() + " has no record");
  }
  const FireEntry& fire = **loaded;
  if (!fire.open || fire.attempt != expired.attempt ||
      fire.fencing_token != expired.fencing_token || fire.HeldAt(now)) {
    return FailedPreconditionError("fire " + expired.fire.RunId() + " (token " +
                                   std::to_string(expired.fencing_token) +
                                   ") was resolved, renewed or taken over meanwhile");
  }
  GNOMON_RETURN_IF_ERROR(FinishRunning(fire, RunOutcome::kLost,
                                       "lease expired; holder " + fire.node_id + " vanished", now));
  if (policy == LostPolicy::kFail) {
    GNOMON_RETURN_IF_ERROR(txn_.CloseFire(fire));
    GNOMON_RETURN_IF_ERROR(AddFailure(fire.key.job_id, RunOutcome::kLost));
    return std::optional<gnomon::Claim>();
  }
  Result<gnomon::Claim> next = txn_.StartAttempt(fire.key, fire.attempt + 1, node_id, ttl, now, "");
  if (!next.ok()) return next.status();
  return std::optional<gnomon::Claim>(std::move(*next));
}

Status FireLedger::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                 const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(ValidateFireKey(fire));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(fire, 0, true, false));
  Result<std::optional<FireEntry>> existing = txn_.LoadFire(fire, 0);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    return AlreadyExistsError("fire " + fire.RunId() + " already has a record");
  }
  Result<JobState> state = txn_.LoadJobState(fire.job_id);
  if (!state.ok()) return state.status();
  return Skip(fire, node_id, reason, txn_.Now(), *state);
}

Status FireLedger::CancelFire(const FireKey& key, const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(ValidateFireKey(key));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(key, 0, false, false));
  Result<std::optional<FireEntry>> loaded = txn_.LoadFire(key, 0);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return NoSuchFire(key);
  const FireEntry& fire = **loaded;
  if (!fire.open) return FireEnded(key);
  Result<std::optional<RunRecord>> record = txn_.LoadRecord(fire.key, fire.attempt);
  if (!record.ok()) return record.status();
  if (record->has_value()) {
    CancelRecord(**record, reason, txn_.Now());
    GNOMON_RETURN_IF_ERROR(txn_.PutRecord(**record));
  }
  GNOMON_RETURN_IF_ERROR(txn_.CloseFire(fire));
  return txn_.BumpJobsVersion(key.job_id);
}

Result<gnomon::Claim> FireLedger::RerunFire(const FireKey& key, const std::string& node_id,
                                            Duration ttl, const std::string& cause) {
  GNOMON_RETURN_IF_ERROR(ValidateRerun(key, node_id, ttl, cause));
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(key, 0, false, false));
  Result<std::optional<FireEntry>> loaded = txn_.LoadFire(key, 0);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return NoSuchFire(key);
  const FireEntry& fire = **loaded;
  if (fire.open) return FireNotEnded(key);
  Result<int> last = txn_.LastAttempt(fire);
  if (!last.ok()) return last.status();
  if (*last == 0) return NoSuchFire(key);
  Result<gnomon::Claim> claim =
      txn_.StartAttempt(fire.key, *last + 1, node_id, ttl, txn_.Now(), cause);
  if (!claim.ok()) return claim.status();
  claim->cause = cause;
  return claim;
}

Status FireLedger::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(claim.fire, claim.attempt, false, false));
  Result<FireEntry> fire = Fenced(claim, txn_.Now());
  if (!fire.ok()) return fire.status();
  return txn_.PutCheckpoint(fire->key, value);
}

Status FireLedger::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  GNOMON_RETURN_IF_ERROR(txn_.Prefetch(claim.fire, claim.attempt, false, false));
  Result<FireEntry> fire = Fenced(claim, txn_.Now());
  if (!fire.ok()) return fire.status();
  Result<std::optional<RunRecord>> record = txn_.LoadRecord(fire->key, claim.attempt);
  if (!record.ok()) return record.status();
  if (!record->has_value() || (*record)->outcome != RunOutcome::kRunning) return Status::Ok();
  (*record)->output = TruncateOutput(output);
  return txn_.PutRecord(**record);
}

}  // namespace gnomon::coord

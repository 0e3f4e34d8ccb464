// Housekeeping: heartbeat, skew, live nodes, lost runs, failed claims, pruning, the children
// sweep, state poll.
#include "src/schedule/housekeeping.h"

#include "src/schedule/child_firer.h"
#include "src/schedule/claim_dispatcher.h"
#include "src/schedule/lease_keeper.h"
#include "src/schedule/misfire_handler.h"

namespace gnomon::internal {

void Housekeeping::Pass() {
  if (!ctx_.options().heartbeat) {
    // A queue worker: no heartbeat, no live set, no lost-run scan (it knows no jobs).
    (void)ctx_.MeasureSkew();
    return;
  }
  if (beat_mu_.TryLock()) {
    BeatLocked();
    beat_mu_.Unlock();
  }
  if (!pass_mu_.TryLock()) return;
  PassLocked();
  pass_mu_.Unlock();
}

void Housekeeping::BeatLocked() {
  const SchedulerOptions& options = ctx_.options();
  const Duration skew = ctx_.MeasureSkew();
  NodeInfo node{options.node_id,  options.host, options.version, ctx_.started_at(), {},
                lease_.running(), skew};
  if (Status s = ctx_.coord().Heartbeat(node, options.housekeeping_interval * 3); !s.ok()) {
    ctx_.Emit(SchedulerEvent::Kind::kError, FireKey{}, "heartbeat: " + s.ToString());
  }
  // The live set that sharded ownership ranks (kept when the backend cannot be read).
  if (Result<std::vector<NodeInfo>> nodes = ctx_.coord().ListNodes(); nodes.ok()) {
    std::vector<std::string> ids;
    for (const NodeInfo& n : *nodes) ids.push_back(n.node_id);
    table_.SetLiveNodes(std::move(ids));
  }
}

void Housekeeping::PassLocked() {
  ResolveLostRuns();
  RetryFailed();
  // Pruning is heavier than the rest: every job about once a minute, spread over the passes (a
  // slice of the jobs per pass), so a node with many jobs never prunes them all at once.
  // One batch: a backend that can (Redis) prunes many jobs per call.
  std::vector<PruneRequest> prunes;
  for (const SpecPtr& s : table_.PruneSlice()) {
    prunes.push_back(PruneRequest{s->id, s->history_keep, s->history_max_age});
  }
  if (!prunes.empty()) (void)ctx_.coord().PruneHistoryMany(prunes);
  if (children_ != nullptr) children_->Sweep();
}

void Housekeeping::RetryFailed() {
  MutexLock lock(table_.mu());
  misfire_.RetryFailedCatchUpsLocked();
  misfire_.RetryFailedClaimsLocked();
}

void Housekeeping::ResolveLostRuns() {
  Result<std::vector<ExpiredFire>> expired = ctx_.coord().ListExpired(100);
  if (!expired.ok()) return;
  for (const ExpiredFire& e : *expired) {
    SpecPtr spec = table_.Spec(e.fire.job_id);
    if (!spec) continue;  // a node that knows the job resolves it
    const Duration sent = ctx_.clock().SteadyNow();
    Result<std::optional<Claim>> r = ctx_.coord().ResolveLost(
        e, ctx_.options().node_id, spec->on_lost, ctx_.options().lease_ttl);
    if (!r.ok()) continue;  // another node got there first
    SchedulerEvent ev = ctx_.MakeEvent(SchedulerEvent::Kind::kLostRun, e.fire);
    ev.attempt = e.attempt;
    ev.fencing_token = e.fencing_token;
    ev.detail = std::string(ToString(spec->on_lost)) + " (holder " + e.node_id + ")";
    ctx_.Notify(ev);
    if (*r) dispatch_.StartClaimed(spec, **r, sent, (*r)->fire.scheduled_at);
  }
}

void Housekeeping::PollStates() {
  state_polls_.Run([this] { PollStatesPass(); });
}

void Housekeeping::PollStatesPass() {
  Result<int64_t> version = ctx_.coord().JobsVersion();
  if (!version.ok()) return;
  if (!misfire_.TakeStatesMissed() && *version == jobs_version_) return;
  jobs_version_ = *version;
  // The change may be an operator's cancel (Coordinator::CancelFire), which revoked a lease:
  // every lease held here is renewed now, so the holder of a revoked one learns it (LeaseLost
  // stops its run) within a state poll and a renewal instead of at its next renewal.
  lease_.RenewAllNow();
  const std::vector<std::string> ids = table_.Ids();
  for (size_t from = 0; from < ids.size(); from += kStateBatch) {
    const std::vector<std::string> chunk(
        ids.begin() + static_cast<std::ptrdiff_t>(from),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), from + kStateBatch)));
    const uint32_t seq = table_.NextStateSeq();
    Result<std::vector<JobState>> st = ctx_.coord().GetJobStates(chunk);
    if (!st.ok() || st->size() != chunk.size()) {
      jobs_version_ = -1;  // the next poll reads them all again
      continue;
    }
    MutexLock lock(table_.mu());
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (JobEntry* e = table_.FindLocked(chunk[i])) {
        JobTable::SetPausedLocked(*e, seq, (*st)[i].paused, (*st)[i].pause_reason);
      }
    }
  }
  ctx_.Emit(SchedulerEvent::Kind::kJobsReloaded, FireKey{},
            "jobs version " + std::to_string(*version));
}

}  // namespace gnomon::internal

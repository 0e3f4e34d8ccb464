// MisfireHandler: missed fires per `misfire`, the start-up catch-up, failed-claim retries.
#include "src/schedule/misfire_handler.h"

#include <algorithm>
#include <utility>

#include "src/schedule/claim_dispatcher.h"
#include "src/schedule/run_driver.h"

namespace gnomon::internal {

void MisfireHandler::ApplyLocked(const JobEntry& e, const std::vector<Instant>& missed,
                                 Instant now) {
  if (missed.empty()) return;
  std::vector<Instant> run;
  std::vector<Instant> skip;
  for (Instant f : missed) {
    (DueAt(*e.spec, f) >= now - e.spec->catchup_window &&
             e.spec->misfire != gnomon::MisfirePolicy::kSkip
         ? run
         : skip)
        .push_back(f);
  }
  const bool once = e.spec->misfire == gnomon::MisfirePolicy::kOnce;
  SubmitSkipRecords(e.spec, skip);
  // One missed fire (the common case: a node or fleet running late) is claimed with the next
  // claim batch, with no read of its record first (ClaimDispatcher::SubmitCatchUpLocked).
  if (run.size() == 1) {
    dispatch_.SubmitCatchUpLocked(e.spec, run.front(), once);
  } else if (once && !run.empty()) {
    SubmitCatchUpOnce(e.spec, std::move(run), table_.TakeoverWindowLocked());
  } else if (!run.empty()) {
    // Catch-up runs go one after another, oldest first, so that overlap = forbid does not skip
    // them against each other.
    ctx_.pool().Submit([this, spec = e.spec, run] { RunCatchUp(spec, run); }, kClaimLane);
  }
}

void MisfireHandler::Recheck(const SpecPtr& spec, Instant scheduled_at) {
  Duration window;
  {
    MutexLock lock(table_.mu());
    window = table_.TakeoverWindowLocked();
  }
  SubmitCatchUpOnce(spec, {scheduled_at}, window);
}

void MisfireHandler::RunCatchUp(const SpecPtr& spec, const std::vector<Instant>& fires) {
  std::vector<FireKey> keys;
  for (Instant f : fires) {
    for (int s = 0; s < spec->shards; ++s) keys.push_back(FireKey{spec->id, f, s, spec->shards});
  }
  driver_.RunInOrder(spec, std::move(keys), RunOptions{.catch_up = true});
}

// The latest fire this node failed to claim may have been claimed on time by a peer after all
// (within `window` of its instant: a takeover, or the backend came back for the peer first); then
// it was not missed and the next older one is the latest missed. A fire already recorded late
// (another node's catch-up of this batch) ends the search: the batch is handled. A peer's claim
// counts only once it is settled: a first attempt still running may be withdrawn while its
// unrenewed lease lasts (wait_replicas: too few replicas acknowledged its batch, so its run never
// started), and a fire passed over for it would then be neither run nor recorded. Until its run
// has ended or it is a lease_ttl (plus `window` for clock skew) old, the batch is decided again
// on a later pass.
void MisfireHandler::SubmitCatchUpOnce(const SpecPtr& spec, std::vector<Instant> batch,
                                       Duration window) {
  ctx_.pool().Submit(
      [this, spec, batch = std::move(batch), window] {
        // The batch up to batch[last] goes back to the job's failed claims, for a later pass.
        auto decide_later = [&](size_t last) {
          MutexLock lock(table_.mu());
          if (JobEntry* e = table_.FindLocked(spec->id)) {
            std::set<Instant>& failed = table_.WaitingLocked(*e).failed;
            for (size_t k = 0; k <= last && failed.size() < kMaxMisfires; ++k) {
              failed.insert(batch[k]);
            }
          }
        };
        std::optional<Instant> latest;
        size_t i = batch.size();
        while (i > 0) {
          const Instant f = batch[--i];
          Result<std::vector<RunRecord>> rec =
              ctx_.coord().GetRun(FireKey{spec->id, f, 0, spec->shards}.RunId());
          if (!rec.ok() && rec.status().code() != StatusCode::kNotFound) {
            decide_later(i);  // the backend cannot tell
            return;
          }
          if (!rec.ok() || rec->empty()) {
            latest = f;
            break;
          }
          const RunRecord& newest = rec->front();
          if (newest.started_at - DueAt(*spec, f) > window) break;  // recorded late: handled
          if (newest.outcome == RunOutcome::kRunning && newest.attempt == 1 &&
              ctx_.Now() - newest.started_at < ctx_.options().lease_ttl + window) {
            decide_later(i);  // claimed on time, but not settled yet
            return;
          }
        }
        SubmitSkipRecords(spec, std::vector<Instant>(batch.begin(), batch.begin() + i));
        if (latest) RunCatchUp(spec, {*latest});
      },
      kClaimLane);
}

// A record that could not be written (backend down) is kept and written again by housekeeping,
// so no missed fire goes without its record.
void MisfireHandler::SubmitSkipRecords(const SpecPtr& spec, const std::vector<Instant>& skip,
                                       std::string reason) {
  if (skip.empty()) return;
  ctx_.pool().Submit(
      [this, spec, skip, reason] {
        std::vector<Instant> unwritten;
        for (Instant f : skip) {
          for (int s = 0; s < spec->shards; ++s) {
            const FireKey fire{spec->id, f, s, spec->shards};
            Status st = ctx_.coord().RecordSkipped(fire, ctx_.options().node_id, reason);
            if (st.ok()) {
              ctx_.Emit(SchedulerEvent::Kind::kSkipped, fire, reason);
            } else if (st.code() != StatusCode::kAlreadyExists) {
              ctx_.Emit(SchedulerEvent::Kind::kError, fire, "record skipped: " + st.ToString());
              if (unwritten.empty() || unwritten.back() != f) unwritten.push_back(f);
            }
          }
        }
        if (unwritten.empty()) return;
        MutexLock lock(table_.mu());
        if (JobEntry* e = table_.FindLocked(spec->id)) {
          JobEntry::Backlog& b = table_.WaitingLocked(*e);
          std::set<Instant>& unrecorded =
              reason == "excluded" ? b.unrecorded_excluded : b.unrecorded;
          for (Instant f : unwritten) {
            if (unrecorded.size() < kMaxMisfires) unrecorded.insert(f);
          }
        }
      },
      kClaimLane);
}

// (A thousand chunks queued at once once held back the claims of on-time fires for the minute
// they took, and the fires they delayed became misfires: hence one chunk at a time.)
void MisfireHandler::StartCatchUpLocked(std::vector<std::string> ids) {
  if (!catchup_queue_.empty() && catchup_queue_.back().size() + ids.size() <= kStateBatch) {
    auto& back = catchup_queue_.back();
    back.insert(back.end(), std::make_move_iterator(ids.begin()),
                std::make_move_iterator(ids.end()));
  } else {
    catchup_queue_.push_back(std::move(ids));
  }
  KickLocked();
}

void MisfireHandler::KickLocked() {
  if (catchup_busy_) return;
  catchup_busy_ = true;
  ctx_.pool().Submit([this] { CatchUpStep(); }, kClaimLane);
}

void MisfireHandler::HoldLocked(const JobEntry& e, const std::vector<Instant>& missed,
                                const std::vector<Instant>& on_time) {
  auto [it, first] = held_.try_emplace(e.spec->id);
  for (const std::vector<Instant>* fires : {&missed, &on_time}) {
    for (Instant f : *fires) {
      if (it->second.size() < static_cast<size_t>(kMaxMisfires)) it->second.push_back(f);
    }
  }
  if (!first) return;  // hurried already (or its read failed: the next pass makes it again)
  hurry_.push_back(e.spec->id);
  KickLocked();
}

void MisfireHandler::RetryFailedCatchUpsLocked() {
  if (read_failed_.empty()) return;
  hurry_.clear();
  for (const auto& [id, fires] : held_) hurry_.push_back(id);
  std::vector<std::string> ids = std::exchange(read_failed_, {});
  for (size_t from = 0; from < ids.size(); from += kStateBatch) {
    StartCatchUpLocked(std::vector<std::string>(
        ids.begin() + static_cast<std::ptrdiff_t>(from),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), from + kStateBatch))));
  }
}

std::vector<std::string> MisfireHandler::NextChunkLocked() {
  std::vector<std::string> ids;
  while (!hurry_.empty() && ids.size() < kStateBatch) {
    if (PendingLocked(hurry_.back())) ids.push_back(std::move(hurry_.back()));
    hurry_.pop_back();
  }
  while (ids.empty() && !catchup_queue_.empty()) {
    for (std::string& id : catchup_queue_.front()) {
      if (PendingLocked(id)) ids.push_back(std::move(id));
    }
    catchup_queue_.pop_front();
  }
  return ids;
}

bool MisfireHandler::PendingLocked(const std::string& id) {
  const JobEntry* e = table_.FindLocked(id);
  if (e == nullptr) held_.erase(id);  // removed before its read: its held fires go with it
  return e != nullptr && e->catchup_pending;
}

void MisfireHandler::CatchUpStep() {
  std::vector<std::string> ids;
  uint32_t seq = 0;
  {
    MutexLock lock(table_.mu());
    ids = NextChunkLocked();
    if (ids.empty()) {
      catchup_busy_ = false;
      return;
    }
    seq = table_.NextStateSeqLocked();
  }
  Result<std::vector<JobState>> states = ctx_.coord().GetJobStates(ids);
  const bool read = states.ok() && states->size() == ids.size();
  // A failed read of jobs answered by different parts of the backend (the primaries of a Redis
  // Cluster, ClaimStore::ClaimRoute) is made again at once, one read per part, so that a part
  // that cannot answer holds back only its own jobs.
  std::map<std::string, std::vector<std::string>> parts;
  if (!read) {
    for (const std::string& id : ids) parts[ctx_.coord().ClaimRoute(id)].push_back(id);
    states_missed_ = true;
    ctx_.Emit(
        SchedulerEvent::Kind::kError, FireKey{},
        "catch-up read (" + std::to_string(ids.size()) + " jobs; " +
            (parts.size() > 1 ? "made again at once, one read per part of the backend"
                              : "made again at the next housekeeping pass") +
            "): " + (states.ok() ? std::string("a short answer") : states.status().ToString()));
  }
  MutexLock lock(table_.mu());
  if (!read && parts.size() > 1) {
    for (auto& [route, part] : parts) catchup_queue_.push_front(std::move(part));
  } else if (!read) {
    // Kept for the next housekeeping pass; the jobs' fires wait for it (held).
    read_failed_.insert(read_failed_.end(), std::make_move_iterator(ids.begin()),
                        std::make_move_iterator(ids.end()));
  } else {
    const Instant now = ctx_.Now();
    for (size_t i = 0; i < ids.size(); ++i) {
      JobEntry* e = table_.FindLocked(ids[i]);
      if (e == nullptr) {
        held_.erase(ids[i]);
      } else if (e->catchup_pending) {
        JobTable::SetPausedLocked(*e, seq, (*states)[i].paused, (*states)[i].pause_reason);
        CatchUpLocked(*e, (*states)[i], now);
      }
    }
  }
  if ((catchup_queue_.empty() && hurry_.empty()) ||
      !ctx_.pool().Submit([this] { CatchUpStep(); }, kClaimLane)) {
    catchup_busy_ = false;
  }
}

void MisfireHandler::CatchUpLocked(JobEntry& e, const JobState& state, Instant now) {
  e.catchup_pending = false;
  // Newest first, so a long outage of a frequent job keeps the fires inside the window.
  std::vector<Instant> missed;
  if (state.last_scheduled && e.spec->enabled) {
    for (std::optional<Instant> f = JobTable::PrevOf(e, e.catchup_until + Duration(1));
         f && *f > *state.last_scheduled && missed.size() < kMaxMisfires;
         f = JobTable::PrevOf(e, *f)) {
      // (A fire due after catchup_until, its jitter offset later, is the loop's.)
      if (DueAt(*e.spec, *f) <= e.catchup_until) missed.push_back(*f);
    }
    std::reverse(missed.begin(), missed.end());
  }
  // The held fires are newer (the loop's: due after catchup_until). One policy decision for all
  // the missed ones (misfire = once runs one of them).
  std::vector<Instant> on_time;
  if (auto it = held_.find(e.spec->id); it != held_.end()) {
    const Duration grace = table_.TakeoverWindowLocked();
    for (Instant f : it->second) {
      (DueAt(*e.spec, f) < now - grace ? missed : on_time).push_back(f);
    }
    held_.erase(it);
  }
  ApplyLocked(e, missed, now);
  for (Instant f : on_time) dispatch_.SubmitHeldLocked(e.spec, f);
}

void MisfireHandler::RetryFailedClaimsLocked() {
  const Instant now = ctx_.Now();
  // (A copy: a backlog settled below leaves the list.)
  const std::vector<std::string> backlogged(table_.BackloggedLocked().begin(),
                                            table_.BackloggedLocked().end());
  for (const std::string& id : backlogged) {
    JobEntry* found = table_.FindLocked(id);
    if (found == nullptr || !found->backlog) continue;
    JobEntry& e = *found;
    std::set<Instant>& unrecorded = e.backlog->unrecorded;
    std::set<Instant>& excluded = e.backlog->unrecorded_excluded;
    std::set<Instant>& failed = e.backlog->failed;
    if (!unrecorded.empty()) {
      SubmitSkipRecords(e.spec, std::vector<Instant>(unrecorded.begin(), unrecorded.end()));
      unrecorded.clear();
    }
    if (!excluded.empty()) {
      SubmitSkipRecords(e.spec, std::vector<Instant>(excluded.begin(), excluded.end()), "excluded");
      excluded.clear();
    }
    // A retry's answer settles it (JobTable::SettleRetryLocked, or a failure puts the fire back
    // in `failed`); one not answered within claim_grace + lease_ttl is taken as settled.
    std::set<Instant>& retried = e.backlog->retried;
    const Duration grace = ctx_.options().claim_grace;
    std::vector<Instant> unanswered;
    for (Instant f : retried) {
      if (!failed.contains(f) && now - DueAt(*e.spec, f) >= grace + ctx_.options().lease_ttl) {
        unanswered.push_back(f);
      }
    }
    for (Instant f : unanswered) table_.SettleRetryLocked(FireKey{id, f, 0, 1}, false);
    if (failed.empty() && retried.empty()) {
      table_.DropBacklogLocked(e);
      continue;
    }
    // The misfire decision for a job's failed claims is its owner's alone (nodes come back from
    // an outage at different moments, each with its own failed set: one decider keeps "once"
    // once). The others keep theirs for when they become the owner: parked, unless a retry of
    // theirs is still to settle, until the live set changes (JobTable::ParkLocked).
    if (table_.RankLocked(id, 0) != 0) {
      if (retried.empty()) table_.ParkLocked(e);
      continue;
    }
    // A failed fire still inside claim_grace is not a misfire yet: it is claimed again, once, as
    // on time, unless a newer fire of the job was handed out already (claimed ahead, or the job
    // fires more often than claim_grace): an on-time claim now would give the older fire a
    // higher fencing token than the newer one, so it is a misfire. The others form the outage's
    // batch, decided per `misfire` once it is closed. It is open while the fire after the batch's
    // latest is still inside its claim window (a peer or a later pass may claim it, or it fails
    // too and becomes the batch's latest), and while a newer fire's retry is not settled: the
    // outage goes on (claims that fail now and then, as while a promoted primary's replicas are
    // missing under wait_replicas), and if that retry fails too, that fire is the batch's
    // latest. Until then which fire is "the latest missed" is not known.
    const Duration window = table_.TakeoverWindowLocked();
    std::vector<Instant> missed;
    std::vector<Instant> on_time;
    for (Instant f : failed) {
      const std::optional<Instant> newer = table_.NextLocked(e, f);
      const bool overtaken = newer && *newer <= e.cursor;
      (now - DueAt(*e.spec, f) < grace && !overtaken && !retried.contains(f) ? on_time : missed)
          .push_back(f);
    }
    for (Instant f : on_time) {
      failed.erase(f);  // back in it if the retry fails or finds the fire claimed elsewhere
      table_.NoteRetryLocked(e, f);
      dispatch_.SubmitRetryLocked(e.spec, f);
    }
    const bool unsettled =
        std::any_of(retried.begin(), retried.end(), [&](Instant f) { return !failed.contains(f); });
    if (missed.empty() || unsettled) continue;  // kept, for a later pass
    const std::optional<Instant> after = table_.NextLocked(e, missed.back());
    if (after && DueAt(*e.spec, *after) <= now && now < DueAt(*e.spec, *after) + window) {
      continue;  // kept, for a later pass
    }
    table_.DropBacklogLocked(e);
    ApplyLocked(e, missed, now);
  }
}

}  // namespace gnomon::internal

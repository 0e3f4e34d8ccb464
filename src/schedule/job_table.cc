// JobTable: the job definitions, compiled schedules, cursors and pause states.
#include "src/schedule/job_table.h"

#include <algorithm>

#include "src/schedule/rendezvous.h"

namespace gnomon::internal {

JobEntry& JobTable::InstallLocked(const CompiledJob& compiled, bool& inserted) {
  const JobSpec& job = compiled.spec;
  const Instant now = ctx_.Now();
  auto [it, is_new] = jobs_.try_emplace(job.id);
  inserted = is_new;
  JobEntry& e = it->second;
  if (is_new) {
    if (free_slots_.empty()) {
      e.slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(&e);
    } else {
      e.slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[e.slot] = &e;
    }
  }
  const bool schedule_changed =
      inserted || e.spec->schedule != job.schedule || e.spec->timezone != job.timezone;
  e.spec = std::make_shared<const JobSpec>(job);
  e.expr = compiled.schedule;
  e.rules = compiled.rules;
  RenewGenLocked(e);
  if (inserted) {
    e.cursor = FirstCursor(job, now);
    e.catchup_until = now - ctx_.options().claim_grace - Duration(1);
  }
  if (schedule_changed && !inserted) e.cursor = std::max(e.cursor, now - Duration(1));
  return e;
}

Instant JobTable::FirstCursor(const JobSpec& job, Instant now) const {
  // (A fire of a jittered job is due up to `jitter` after its instant: one whose instant is older
  // than the grace may still be on time, so the loop expands from that far back.)
  return now - ctx_.options().claim_grace - FireRulesOf(job).jitter - Duration(1);
}

void JobTable::RetainLocked(const std::set<std::string>& ids) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (ids.count(it->first)) {
      ++it;
    } else {
      DropBacklogLocked(it->second);
      ReleaseSlotLocked(it->second);
      it = jobs_.erase(it);
    }
  }
}

bool JobTable::Remove(const std::string& id) {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  DropBacklogLocked(it->second);
  ReleaseSlotLocked(it->second);
  jobs_.erase(it);
  return true;
}

void JobTable::ReleaseSlotLocked(const JobEntry& e) {
  slots_[e.slot] = nullptr;
  free_slots_.push_back(e.slot);
}

JobEntry* JobTable::AtLocked(uint32_t slot, uint64_t gen) {
  if (slot >= slots_.size()) return nullptr;
  JobEntry* e = slots_[slot];
  return e != nullptr && e->gen == gen ? e : nullptr;
}

JobEntry* JobTable::FindLocked(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobTable::FindLocked(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

SpecPtr JobTable::Spec(const std::string& id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return nullptr;
  return it->second.spec;
}

Result<SpecPtr> JobTable::SpecWithParams(const std::string& id, const std::string& params) const {
  SpecPtr spec = Spec(id);
  if (!spec) return NotFoundError("job \"" + id + "\" is not defined");
  if (params.empty()) return spec;
  Result<std::string> merged = MergeParams(spec->params, params);
  if (!merged.ok()) return merged.status();
  auto with_params = std::make_shared<JobSpec>(*spec);
  with_params->params = std::move(*merged);
  return SpecPtr(std::move(with_params));
}

std::vector<std::string> JobTable::Ids() const {
  MutexLock lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, e] : jobs_) ids.push_back(id);
  return ids;
}

std::optional<Instant> JobTable::NextLocked(const JobEntry& e, Instant after) {
  if (e.rules) return e.rules->Next(*e.expr, after);
  for (const NextMemo& m : next_memo_) {
    if (m.expr == e.expr && m.after == after) return m.next;
  }
  NextMemo& slot = next_memo_[next_memo_victim_++ % next_memo_.size()];
  slot = NextMemo{e.expr, after, e.expr->Next(after)};
  return slot.next;
}

void JobTable::KeepFailedLocked(const FireKey& fire) {
  auto it = jobs_.find(fire.job_id);
  if (it == jobs_.end()) return;
  JobEntry& e = it->second;
  // (A parked job stays parked: its failed claims wait for it to be owned here.)
  std::set<Instant>& failed = (e.backlog ? *e.backlog : WaitingLocked(e)).failed;
  if (failed.size() < kMaxMisfires) failed.insert(fire.scheduled_at);
}

void JobTable::NoteRetryLocked(JobEntry& e, Instant fire) {
  if (WaitingLocked(e).retried.insert(fire).second) {
    retries_.fetch_add(1, std::memory_order_relaxed);
  }
}

JobEntry::Backlog& JobTable::WaitingLocked(JobEntry& e) {
  if (!e.backlog) {
    e.backlog = std::make_unique<JobEntry::Backlog>();
    backlogged_.insert(e.spec->id);
  } else if (e.backlog->parked) {
    e.backlog->parked = false;
    parked_.erase(e.spec->id);
    backlogged_.insert(e.spec->id);
  }
  return *e.backlog;
}

void JobTable::ParkLocked(JobEntry& e) {
  if (e.backlog->parked) return;
  e.backlog->parked = true;
  backlogged_.erase(e.spec->id);
  parked_.insert(e.spec->id);
}

void JobTable::DropBacklogLocked(JobEntry& e) {
  if (!e.backlog) return;
  retries_.fetch_sub(static_cast<int64_t>(e.backlog->retried.size()), std::memory_order_relaxed);
  (e.backlog->parked ? parked_ : backlogged_).erase(e.spec->id);
  e.backlog.reset();
}

void JobTable::SettleRetryLocked(const FireKey& fire, bool elsewhere) {
  auto it = jobs_.find(fire.job_id);
  if (it == jobs_.end() || !it->second.backlog) return;
  JobEntry::Backlog& b = *it->second.backlog;
  if (!b.retried.contains(fire.scheduled_at)) return;
  if (elsewhere) {
    if (b.failed.size() < kMaxMisfires) b.failed.insert(fire.scheduled_at);
    return;
  }
  b.retried.erase(fire.scheduled_at);
  retries_.fetch_sub(1, std::memory_order_relaxed);
}

void JobTable::SetLiveNodes(std::vector<std::string> ids) {
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  MutexLock lock(mu_);
  std::vector<std::string> before = live_nodes_;
  std::sort(before.begin(), before.end());
  if (sorted != before) {
    for (const std::string& id : parked_) {
      if (auto it = jobs_.find(id); it != jobs_.end() && it->second.backlog) {
        it->second.backlog->parked = false;
        backlogged_.insert(id);
      }
    }
    parked_.clear();
  }
  live_nodes_ = std::move(ids);
  const Duration steady = ctx_.clock().SteadyNow();
  if (live_nodes_.size() >= live_peak_ || steady - live_peak_at_ > std::chrono::minutes(1)) {
    live_peak_ = live_nodes_.size();
    live_peak_at_ = steady;
  }
}

std::vector<std::string> JobTable::LiveNodes() const {
  MutexLock lock(mu_);
  return live_nodes_;
}

int JobTable::RankLocked(const std::string& job_id, int shard) const {
  if (ctx_.options().takeover_delay <= Duration(0)) return 0;
  return RendezvousRank(live_nodes_, ctx_.options().node_id, job_id, shard);
}

Duration JobTable::TakeoverWindowLocked() const {
  return ctx_.options().claim_grace +
         ctx_.options().takeover_delay * static_cast<int64_t>(live_peak_ > 1 ? live_peak_ - 1 : 0);
}

uint32_t JobTable::NextStateSeq() {
  MutexLock lock(mu_);
  return NextStateSeqLocked();
}

void JobTable::SetPausedLocked(JobEntry& e, uint32_t seq, bool paused, std::string reason) {
  if (seq <= e.state_seq) return;
  e.state_seq = seq;
  e.paused = paused;
  e.pause_reason = std::move(reason);
}

void JobTable::SetPaused(const std::string& id, bool paused, const std::string& reason) {
  MutexLock lock(mu_);
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    SetPausedLocked(it->second, NextStateSeqLocked(), paused, reason);
  }
}

void JobTable::CountRunLocked(JobEntry& e) {
  if (e.runs_since_prune < UINT16_MAX) ++e.runs_since_prune;
}

uint32_t JobTable::AdjustRunning(const std::string& id, int delta, bool ran, uint32_t slot) {
  MutexLock lock(mu_);
  JobEntry* e = slot < slots_.size() ? slots_[slot] : nullptr;
  if (e == nullptr || e->spec->id != id) e = FindLocked(id);  // (moved, or no slot known)
  if (e == nullptr) return kNoSlot;
  e->running += delta;
  if (ran) CountRunLocked(*e);
  return e->slot;
}

void JobTable::MarkRan(const std::string& id) {
  MutexLock lock(mu_);
  if (auto it = jobs_.find(id); it != jobs_.end()) CountRunLocked(it->second);
}

// Each node prunes what it wrote, so this costs in proportion to the runs, not to the number of
// jobs; the hourly sweep (for max_age of jobs that stopped running) of a million jobs is spread
// over the hour (about 1,400 a pass), not one call per job in the node's first minute.
std::vector<SpecPtr> JobTable::PruneSlice() {
  std::vector<SpecPtr> specs;
  MutexLock lock(mu_);
  if (jobs_.empty()) return specs;
  const Duration interval = std::max(ctx_.options().housekeeping_interval, Duration(1));
  const auto size = static_cast<int64_t>(jobs_.size());
  // The jobs a pass visits so that every job is visited once per `period` (at least 1).
  auto slice_of = [&](Duration period) {
    const int64_t passes = std::max<int64_t>(1, period / interval);
    return std::min(static_cast<size_t>(size), static_cast<size_t>((size + passes - 1) / passes));
  };
  auto it = jobs_.upper_bound(prune_cursor_);
  for (size_t n = 0, slice = slice_of(std::chrono::minutes(1)); n < slice; ++n, ++it) {
    if (it == jobs_.end()) it = jobs_.begin();
    // A job is pruned once its history may have grown by a quarter of what it keeps (at least
    // one run): a job that keeps 100 fires every 25 of its runs, not after each.
    if (it->second.runs_since_prune >= std::max(1, it->second.spec->history_keep / 4)) {
      specs.push_back(it->second.spec);
      it->second.runs_since_prune = 0;
    }
    prune_cursor_ = it->first;
  }
  it = jobs_.upper_bound(sweep_cursor_);
  for (size_t n = 0, slice = slice_of(std::chrono::hours(1)); n < slice; ++n, ++it) {
    if (it == jobs_.end()) it = jobs_.begin();
    specs.push_back(it->second.spec);
    sweep_cursor_ = it->first;
  }
  return specs;
}

namespace {
JobView ViewOf(const JobEntry& e) {
  return JobView{*e.spec, e.expr, e.next, e.paused, e.pause_reason, e.running, e.rules};
}
}  // namespace

std::vector<JobView> JobTable::Views() const {
  MutexLock lock(mu_);
  std::vector<JobView> out;
  for (const auto& [id, e] : jobs_) out.push_back(ViewOf(e));
  return out;
}

std::optional<JobView> JobTable::View(const std::string& id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return ViewOf(it->second);
}

}  // namespace gnomon::internal

#include "src/schedule/child_firer.h"

#include <algorithm>
#include <set>

#include "src/schedule/run_driver.h"

namespace gnomon::internal {

namespace {

// Whether `rec`, the newest attempt of its fire, is the fire's final outcome: a failed attempt
// with retries left is followed by another.
bool IsFinal(const RunRecord& rec, const JobSpec& job) {
  switch (rec.outcome) {
    case RunOutcome::kRunning:
    case RunOutcome::kSkipped:
      return false;
    case RunOutcome::kFailed:
    case RunOutcome::kTimedOut:
      return rec.attempt > job.retries;
    default:
      return true;
  }
}

std::string Capped(std::string s, size_t max) {
  if (s.size() > max) s.resize(max);
  return s;
}

}  // namespace

void ChildFirer::Track(const JobSpec& job) {
  if (!job.dependencies) return;
  MutexLock lock(mu_);
  for (const std::string& parent : job.dependencies->after) joins_of_[parent].insert(job.id);
  auto [it, inserted] = tracked_.try_emplace(job.id);
  // A job that starts naming children after Start: its runs from now on.
  if (inserted && ctx_.started_at() != Instant{}) it->second = ctx_.Now();
}

void ChildFirer::Ended(const JobSpec& parent, const FireKey& fire, RunOutcome outcome,
                       const std::string& params) {
  if (!ctx_.options().heartbeat) return;
  Fire(parent, fire, outcome, params);
  if (outcome != RunOutcome::kSucceeded || ctx_.Stopping()) return;
  std::set<std::string> ids;
  {
    MutexLock lock(mu_);
    auto it = joins_of_.find(parent.id);
    if (it == joins_of_.end()) return;
    ids = it->second;
  }
  for (const std::string& id : ids) {
    const SpecPtr join = table_.Spec(id);
    if (!join) continue;
    const std::vector<std::string>& after = DependenciesOf(*join).after;
    if (std::find(after.begin(), after.end(), parent.id) == after.end()) continue;
    Join(*join, fire.scheduled_at, /*timeouts=*/false);
  }
}

void ChildFirer::Fire(const JobSpec& parent, const FireKey& fire, RunOutcome outcome,
                      const std::string& params) {
  const std::vector<std::string> children = ChildrenFor(parent, outcome);
  if (children.empty() || ctx_.Stopping()) return;
  const std::string cause = "after " + fire.RunId() + " " + std::string(ToString(outcome));
  for (const std::string& child : children) {
    Result<SpecPtr> with_params = table_.SpecWithParams(child, params);
    if (!with_params.ok()) {
      ctx_.Emit(SchedulerEvent::Kind::kError, FireKey{child, fire.scheduled_at, 0, 1},
                "child of " + fire.RunId() + ": " + with_params.status().ToString());
      continue;
    }
    const SpecPtr spec = *with_params;
    for (int s = 0; s < spec->shards; ++s) {
      const FireKey key{child, fire.scheduled_at, s, spec->shards};
      ctx_.pool().Submit(
          [this, spec, key, cause] {
            driver_.RunFire(spec, key, std::nullopt, ctx_.clock().SteadyNow(), {.cause = cause},
                            nullptr);
          },
          kRunLane);
    }
  }
}

void ChildFirer::Join(const JobSpec& job, Instant t, bool timeouts) {
  std::vector<FireKey> keys;
  for (int s = 0; s < job.shards; ++s) keys.push_back(FireKey{job.id, t, s, job.shards});
  Result<std::vector<bool>> recorded = ctx_.coord().FiresRecorded(keys);
  if (!recorded.ok() || std::all_of(recorded->begin(), recorded->end(), [](bool b) { return b; })) {
    return;
  }
  const DependencySpec& deps = DependenciesOf(job);
  std::vector<std::string> missing;
  for (const std::string& p : deps.after) {
    const SpecPtr parent = table_.Spec(p);
    Result<std::vector<RunRecord>> runs = ctx_.coord().GetRun(FireKey{p, t, 0, 1}.RunId());
    const bool ok =
        parent && runs.ok() && !runs->empty() && runs->back().outcome == RunOutcome::kSucceeded;
    if (!ok) {
      // A backend error leaves the join for a later pass (nothing recorded on a guess).
      if (!runs.ok() && runs.status().code() != StatusCode::kNotFound) return;
      missing.push_back(p);
    }
  }
  if (missing.empty()) {
    std::string names;
    for (const std::string& p : deps.after) names += (names.empty() ? "" : ", ") + p;
    const std::string cause = Capped("joined " + names + " at " + t.ToRfc3339(), kMaxCauseBytes);
    auto spec = std::make_shared<const JobSpec>(job);
    for (size_t i = 0; i < keys.size(); ++i) {
      if ((*recorded)[i]) continue;
      ctx_.pool().Submit(
          [this, spec, key = keys[i], cause] {
            driver_.RunFire(spec, key, std::nullopt, ctx_.clock().SteadyNow(), {.cause = cause},
                            nullptr);
          },
          kRunLane);
    }
    return;
  }
  if (!timeouts || deps.join_timeout <= Duration(0) || ctx_.Now() < t + deps.join_timeout) return;
  std::string names;
  for (const std::string& p : missing) names += (names.empty() ? "" : ", ") + p;
  const std::string reason = Capped("join_timeout: " + names + " did not succeed", 200);
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((*recorded)[i]) continue;
    Status s = ctx_.coord().RecordSkipped(keys[i], ctx_.options().node_id, reason);
    if (s.ok()) {
      SchedulerEvent ev = ctx_.MakeEvent(SchedulerEvent::Kind::kSkipped, keys[i]);
      ev.detail = reason;
      ctx_.Notify(ev);
    }
  }
}

const std::vector<RunRecord>& ChildFirer::EndedFires(const JobSpec& job, Read& read) {
  auto [it, inserted] = read.try_emplace(job.id);
  std::vector<RunRecord>& out = it->second;
  if (!inserted) return out;
  RunQuery q;
  q.job_id = job.id;
  q.limit = kSweepRuns;
  Result<RunPage> page = ctx_.coord().ListRuns(q);
  if (!page.ok()) return out;
  // The newest attempt of each fire (the page is newest fire first, attempt descending).
  std::string last_run_id;
  for (RunRecord& r : page->runs) {
    if (r.run_id == last_run_id) continue;
    last_run_id = r.run_id;
    if (IsFinal(r, job)) out.push_back(std::move(r));
  }
  return out;
}

void ChildFirer::SweepParent(const JobSpec& parent, Instant from, Read& read) {
  const DependencySpec& d = DependenciesOf(parent);
  if (d.on_success.empty() && d.on_failure.empty() && d.on_complete.empty()) return;
  for (const RunRecord& r : EndedFires(parent, read)) {
    if (r.finished_at < from) continue;
    std::vector<FireKey> keys;
    for (const std::string& child : ChildrenFor(parent, r.outcome)) {
      const SpecPtr spec = table_.Spec(child);
      const int shards = spec ? spec->shards : 1;
      for (int s = 0; s < shards; ++s) keys.push_back(FireKey{child, r.scheduled_at, s, shards});
    }
    if (keys.empty()) continue;
    Result<std::vector<bool>> recorded = ctx_.coord().FiresRecorded(keys);
    if (!recorded.ok()) continue;
    if (std::all_of(recorded->begin(), recorded->end(), [](bool b) { return b; })) continue;
    // Fire claims each child fire; those recorded meanwhile are refused by the backend.
    Fire(parent, FireKey{parent.id, r.scheduled_at, r.shard, r.shard_count}, r.outcome, r.params);
  }
}

void ChildFirer::SweepJoin(const JobSpec& join, Instant from, Read& read) {
  const DependencySpec& d = DependenciesOf(join);
  if (d.after.empty()) return;
  // The instants at which a listed job's fire ended in the window, or whose timeout passed in
  // it (their fires ended up to join_timeout before).
  std::set<Instant> instants;
  for (const std::string& p : d.after) {
    const SpecPtr parent = table_.Spec(p);
    if (!parent) continue;
    for (const RunRecord& r : EndedFires(*parent, read)) {
      const bool ended_in_window = r.finished_at >= from;
      const bool timed_out_in_window = d.join_timeout > Duration(0) &&
                                       r.scheduled_at + d.join_timeout >= from &&
                                       r.scheduled_at + d.join_timeout <= ctx_.Now();
      if (ended_in_window || timed_out_in_window) instants.insert(r.scheduled_at);
    }
  }
  for (Instant t : instants) Join(join, t, /*timeouts=*/true);
}

void ChildFirer::Sweep() {
  std::vector<std::pair<std::string, Instant>> jobs;
  {
    MutexLock lock(mu_);
    const Instant from = ctx_.Now() - kSweepWindow;
    for (auto& [id, since] : tracked_) {
      if (!since) since = ctx_.started_at() - kSweepWindow;  // known at Start: a restart
      jobs.emplace_back(id, std::max(*since, from));
    }
  }
  Read read;
  for (const auto& [id, from] : jobs) {
    if (ctx_.Stopping()) return;
    const SpecPtr job = table_.Spec(id);
    if (!job || !job->dependencies) {
      MutexLock lock(mu_);
      tracked_.erase(id);
      continue;
    }
    SweepParent(*job, from, read);
    SweepJoin(*job, from, read);
  }
}

}  // namespace gnomon::internal

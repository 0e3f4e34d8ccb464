#include "gnomon/testing/memory_coordinator.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"
#include "src/coord/fire_ledger.h"

namespace gnomon::testing {

MemoryCoordinator::MemoryCoordinator(Clock& clock) : clock_(clock) {}

MemoryCoordinator::FireId MemoryCoordinator::IdOf(const FireKey& fire) {
  return {fire.job_id, fire.scheduled_at.unix_millis(), fire.shard};
}

MemoryCoordinator::RunKey MemoryCoordinator::RunKeyOf(const FireKey& fire, int attempt) {
  return {-fire.scheduled_at.unix_millis(), fire.job_id, fire.shard, -attempt};
}

Result<Instant> MemoryCoordinator::Now() { return clock_.Now(); }

// The fire ledger's storage: these maps, under mu_ (held by the caller for the Txn's life).
class MemoryCoordinator::Txn final : public coord::LedgerTxn {
 public:
  explicit Txn(MemoryCoordinator& c) : c_(c) {}

  // `op` on a ledger over `c`, under its mutex.
  template <class Op>
  static auto Run(MemoryCoordinator& c, Op op) {
    std::lock_guard<std::mutex> lock(c.mu_);
    Txn txn(c);
    coord::FireLedger ledger(txn);
    return op(ledger);
  }

  Instant Now() override { return c_.clock_.Now(); }

  Result<std::optional<coord::FireEntry>> LoadFire(const FireKey& key, int) override {
    auto it = c_.fires_.find(IdOf(key));
    if (it == c_.fires_.end()) return std::optional<coord::FireEntry>();
    return std::optional<coord::FireEntry>(EntryOf(it->second));
  }

  Result<std::vector<coord::FireEntry>> LiveFires(const FireKey& fire, Instant now) override {
    std::vector<coord::FireEntry> out;
    auto first = c_.fires_.lower_bound(FireId{fire.job_id, INT64_MIN, INT32_MIN});
    for (auto it = first; it != c_.fires_.end() && std::get<0>(it->first) == fire.job_id; ++it) {
      coord::FireEntry other = EntryOf(it->second);
      if (other.HeldAt(now) && other.key.scheduled_at != fire.scheduled_at) out.push_back(other);
    }
    return out;
  }

  Status CreateFire(const FireKey& key, const std::string& node_id, Instant now) override {
    Fire fire;
    fire.key = key;
    fire.node_id = node_id;
    fire.lease_expires_at = now;
    c_.fires_.emplace(IdOf(key), std::move(fire));
    return Status::Ok();
  }

  Result<gnomon::Claim> StartAttempt(const FireKey& key, int attempt, const std::string& node_id,
                                     Duration ttl, Instant now, const std::string& cause) override {
    Fire& fire = c_.fires_.at(IdOf(key));
    fire.attempt = attempt;
    fire.fencing_token = ++c_.jobs_[key.job_id].last_token;
    fire.node_id = node_id;
    fire.lease_expires_at = now + ttl;
    fire.open = true;
    RunRecord running =
        coord::NewRecord(fire.key, attempt, fire.fencing_token, node_id, now, RunOutcome::kRunning);
    running.cause = cause;
    c_.runs_[RunKeyOf(fire.key, attempt)] = std::move(running);
    return gnomon::Claim{fire.key, attempt, fire.fencing_token, node_id, fire.lease_expires_at};
  }

  Status ExtendLease(const coord::FireEntry& entry, Duration ttl, Instant now) override {
    c_.fires_.at(IdOf(entry.key)).lease_expires_at = now + ttl;
    return Status::Ok();
  }

  Status CloseFire(const coord::FireEntry& entry) override {
    c_.fires_.at(IdOf(entry.key)).open = false;
    return Status::Ok();
  }

  Result<std::optional<RunRecord>> LoadRecord(const FireKey& key, int attempt) override {
    auto it = c_.runs_.find(RunKeyOf(key, attempt));
    if (it == c_.runs_.end()) return std::optional<RunRecord>();
    return std::optional<RunRecord>(it->second);
  }

  Status PutRecord(const RunRecord& record) override {
    FireKey key{record.job_id, record.scheduled_at, record.shard, record.shard_count};
    c_.runs_[RunKeyOf(key, record.attempt)] = record;
    return Status::Ok();
  }

  Status PutCheckpoint(const FireKey& key, const std::string& value) override {
    c_.fires_.at(IdOf(key)).checkpoint = value;
    return Status::Ok();
  }

  Result<JobState> LoadJobState(const std::string& job_id) override {
    auto it = c_.jobs_.find(job_id);
    return it == c_.jobs_.end() ? JobState{} : it->second.state;
  }

  Status PutJobState(const std::string& job_id, const JobState& state) override {
    c_.jobs_[job_id].state = state;
    return Status::Ok();
  }

  Status BumpJobsVersion(const std::string&) override {
    ++c_.jobs_version_;
    c_.jobs_changed_.notify_all();
    return Status::Ok();
  }

 private:
  static coord::FireEntry EntryOf(const Fire& fire) {
    return coord::FireEntry{fire.key,     fire.attempt,          fire.fencing_token,
                            fire.node_id, fire.lease_expires_at, fire.open};
  }

  MemoryCoordinator& c_;
};

Result<ClaimOutcome> MemoryCoordinator::Claim(const ClaimRequest& req) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.Claim(req); });
}

Status MemoryCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return coord::StoreRenewal(
      claim, Txn::Run(*this, [&](coord::FireLedger& l) { return l.Renew(claim, ttl); }));
}

Result<gnomon::Claim> MemoryCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.NextAttempt(claim, ttl); });
}

Status MemoryCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.Report(claim, record, final); });
}

Status MemoryCoordinator::CancelFire(const FireKey& key, const std::string& reason) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.CancelFire(key, reason); });
}

Result<gnomon::Claim> MemoryCoordinator::RerunFire(const FireKey& key, const std::string& node_id,
                                                   Duration ttl, const std::string& cause) {
  return Txn::Run(*this,
                  [&](coord::FireLedger& l) { return l.RerunFire(key, node_id, ttl, cause); });
}

Result<std::vector<ExpiredFire>> MemoryCoordinator::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::lock_guard<std::mutex> lock(mu_);
  const Instant now = clock_.Now();
  std::vector<ExpiredFire> out;
  for (const auto& [id, fire] : fires_) {
    if (!fire.open || fire.lease_expires_at > now) continue;
    out.push_back(ExpiredFire{fire.key, fire.attempt, fire.fencing_token, fire.node_id,
                              fire.lease_expires_at});
  }
  std::stable_sort(out.begin(), out.end(), [](const ExpiredFire& a, const ExpiredFire& b) {
    return a.lease_expired_at < b.lease_expired_at;
  });
  if (out.size() > static_cast<size_t>(*page)) out.resize(*page);
  return out;
}

Result<std::optional<gnomon::Claim>> MemoryCoordinator::ResolveLost(const ExpiredFire& expired,
                                                                    const std::string& node_id,
                                                                    LostPolicy policy,
                                                                    Duration ttl) {
  return Txn::Run(
      *this, [&](coord::FireLedger& l) { return l.ResolveLost(expired, node_id, policy, ttl); });
}

Status MemoryCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                        const std::string& reason) {
  return Txn::Run(*this,
                  [&](coord::FireLedger& l) { return l.RecordSkipped(fire, node_id, reason); });
}

Status MemoryCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.SaveCheckpoint(claim, value); });
}

Status MemoryCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Txn::Run(*this, [&](coord::FireLedger& l) { return l.SaveLiveOutput(claim, output); });
}

Result<std::optional<std::string>> MemoryCoordinator::LoadCheckpoint(const FireKey& fire) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fires_.find(IdOf(fire));
  if (it == fires_.end()) return std::optional<std::string>();
  return it->second.checkpoint;
}

Result<JobState> MemoryCoordinator::GetJobState(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return JobState{};
  return it->second.state;
}

Status MemoryCoordinator::SetPaused(const std::string& job_id, bool paused,
                                    const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::lock_guard<std::mutex> lock(mu_);
  JobState& state = jobs_[job_id].state;
  state.paused = paused;
  state.pause_reason = paused ? reason : "";
  ++jobs_version_;
  jobs_changed_.notify_all();
  return Status::Ok();
}

Result<RunPage> MemoryCoordinator::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> start = coord::PageStart(query.cursor);
  if (!start.ok()) return start.status();
  const std::optional<coord::RunPosition> after = *start;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.begin();
  if (after) {
    it = runs_.upper_bound(
        RunKey{-after->scheduled_ms, after->job_id, after->shard, -after->attempt});
  }
  RunPage page;
  for (; it != runs_.end(); ++it) {
    const RunRecord& r = it->second;
    if (!query.job_id.empty() && r.job_id != query.job_id) continue;
    if (query.outcome && r.outcome != *query.outcome) continue;
    if (query.scheduled_from && r.scheduled_at < *query.scheduled_from) continue;
    if (query.scheduled_until && r.scheduled_at >= *query.scheduled_until) continue;
    if (page.runs.size() == static_cast<size_t>(*limit)) {
      page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
      break;
    }
    page.runs.push_back(r);
  }
  return page;
}

Result<std::vector<RunRecord>> MemoryCoordinator::GetRun(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunRecord> out;
  for (const auto& [key, record] : runs_) {
    if (record.run_id == run_id) out.push_back(record);
  }
  if (out.empty()) return NotFoundError("run " + run_id.substr(0, 200) + " has no record");
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.attempt < b.attempt; });
  return out;
}

Status MemoryCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  std::lock_guard<std::mutex> lock(mu_);
  const Instant cutoff = clock_.Now() - max_age;
  // Fires (scheduled, shard) in listing order; the first keep_last are kept.
  int fires_seen = 0;
  std::optional<std::pair<int64_t, int>> current;
  for (auto it = runs_.begin(); it != runs_.end();) {
    const RunRecord& r = it->second;
    if (r.job_id != job_id) {
      ++it;
      continue;
    }
    std::pair<int64_t, int> fire{r.scheduled_at.unix_millis(), r.shard};
    if (current != fire) {
      current = fire;
      ++fires_seen;
    }
    const bool prune = fires_seen > keep_last || r.scheduled_at < cutoff;
    if (prune && r.outcome != RunOutcome::kRunning) {
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  // Fire records are the claim keys that stop a second claim; they go only with max_age.
  for (auto it = fires_.begin(); it != fires_.end();) {
    if (std::get<0>(it->first) == job_id && !it->second.open &&
        it->second.key.scheduled_at < cutoff) {
      it = fires_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

Status MemoryCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::lock_guard<std::mutex> lock(mu_);
  const Instant now = clock_.Now();
  Node& entry = nodes_[node.node_id];
  entry.info = node;
  entry.info.last_heartbeat = now;
  entry.expires_at = now + ttl;
  return Status::Ok();
}

Result<std::vector<NodeInfo>> MemoryCoordinator::ListNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  const Instant now = clock_.Now();
  std::vector<NodeInfo> out;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (it->second.expires_at <= now) {
      it = nodes_.erase(it);
    } else {
      out.push_back(it->second.info);
      ++it;
    }
  }
  return out;
}

Result<int64_t> MemoryCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = definitions_.find(job_id);
  if (it == definitions_.end() && expected_version != 0) {
    return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                   std::to_string(expected_version) + ")");
  }
  if (it != definitions_.end() && expected_version == 0) {
    return AlreadyExistsError("job " + job_id + " already exists");
  }
  if (it != definitions_.end() && it->second.version != expected_version) {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   std::to_string(it->second.version) + ", not " +
                                   std::to_string(expected_version));
  }
  const int64_t version = ++jobs_version_;
  jobs_changed_.notify_all();
  definitions_[job_id] = StoredJob{job_id, definition, version};
  return version;
}

Status MemoryCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = definitions_.find(job_id);
  if (it == definitions_.end()) return NotFoundError("job " + job_id + " does not exist");
  if (expected_version != -1 && it->second.version != expected_version) {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   std::to_string(it->second.version) + ", not " +
                                   std::to_string(expected_version));
  }
  definitions_.erase(it);
  ++jobs_version_;
  jobs_changed_.notify_all();
  return Status::Ok();
}

Result<StoredJob> MemoryCoordinator::GetJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = definitions_.find(job_id);
  if (it == definitions_.end()) return coord::JobNotFound(job_id);
  return it->second;
}

Result<std::vector<StoredJob>> MemoryCoordinator::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredJob> out;
  for (const auto& [id, job] : definitions_) out.push_back(job);
  return out;
}

Result<int64_t> MemoryCoordinator::JobsVersion() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_version_;
}

// The timeout is real time (a bound on a wait for another thread's change), whatever clock_ is.
Result<int64_t> MemoryCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  SystemClock::Get().WaitFor(lock, jobs_changed_, timeout, [&] { return jobs_version_ != since; });
  return jobs_version_;
}

Result<std::vector<bool>> MemoryCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  for (const FireKey& f : fires) GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> out;
  out.reserve(fires.size());
  for (const FireKey& f : fires) out.push_back(fires_.count(IdOf(f)) > 0);
  return out;
}

Result<int64_t> MemoryCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::lock_guard<std::mutex> lock(mu_);
  AuditRecord r = record;
  r.seq = ++audit_seq_;
  r.at = clock_.Now();
  std::deque<AuditRecord>& log = audit_[r.result == AuditResult::kOk ? 0 : 1];
  log.push_back(std::move(r));
  while (log.size() > static_cast<size_t>(keep)) log.pop_front();
  return audit_seq_;
}

Result<std::vector<AuditRecord>> MemoryCoordinator::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  const size_t n = static_cast<size_t>(*page);
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AuditRecord> out;
  auto ok = audit_[0].rbegin(), failed = audit_[1].rbegin();
  auto skip = [&](auto& it, const auto& end) {
    while (it != end && before_seq != 0 && it->seq >= before_seq) ++it;
  };
  skip(ok, audit_[0].rend());
  skip(failed, audit_[1].rend());
  while (out.size() < n && (ok != audit_[0].rend() || failed != audit_[1].rend())) {
    const bool take_ok =
        failed == audit_[1].rend() || (ok != audit_[0].rend() && ok->seq > failed->seq);
    out.push_back(take_ok ? *ok++ : *failed++);
  }
  return out;
}

}  // namespace gnomon::testing

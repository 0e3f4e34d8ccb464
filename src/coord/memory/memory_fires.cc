#include "src/coord/memory/memory_fires.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"
#include "src/coord/fire_ledger.h"

namespace gnomon::coord::memory {

// The fire ledger's storage: the maps of a MemoryState, under its mu (held by Run for the
// Txn's life).
namespace {

class Txn final : public coord::LedgerTxn {
 public:
  explicit Txn(MemoryState& s) : s_(s) {}

  // `op` on a ledger over `s`, under its mutex.
  template <class Op>
  static auto Run(MemoryState& s, Op op) {
    std::lock_guard<std::mutex> lock(s.mu);
    Txn txn(s);
    coord::FireLedger ledger(txn);
    return op(ledger);
  }

  Instant Now() override { return s_.clock.Now(); }

  Result<std::optional<coord::FireEntry>> LoadFire(const FireKey& key, int) override {
    auto it = s_.fires.find(IdOf(key));
    if (it == s_.fires.end()) return std::optional<coord::FireEntry>();
    return std::optional<coord::FireEntry>(EntryOf(it->second));
  }

  Result<std::vector<coord::FireEntry>> LiveFires(const FireKey& fire, Instant now) override {
    std::vector<coord::FireEntry> out;
    auto first = s_.fires.lower_bound(FireId{fire.job_id, INT64_MIN, INT32_MIN});
    for (auto it = first; it != s_.fires.end() && std::get<0>(it->first) == fire.job_id; ++it) {
      coord::FireEntry other = EntryOf(it->second);
      if (other.HeldAt(now) && other.key.scheduled_at != fire.scheduled_at) out.push_back(other);
    }
    return out;
  }

  Status CreateFire(const FireKey& key, const std::string& node_id, Instant now) override {
    MemoryState::Fire fire;
    fire.key = key;
    fire.node_id = node_id;
    fire.lease_expires_at = now;
    s_.fires.emplace(IdOf(key), std::move(fire));
    return Status::Ok();
  }

  Result<gnomon::Claim> StartAttempt(const FireKey& key, int attempt, const std::string& node_id,
                                     Duration ttl, Instant now, const std::string& cause) override {
    MemoryState::Fire& fire = s_.fires.at(IdOf(key));
    fire.attempt = attempt;
    fire.fencing_token = ++s_.jobs[key.job_id].last_token;
    fire.node_id = node_id;
    fire.lease_expires_at = now + ttl;
    fire.open = true;
    RunRecord running =
        coord::NewRecord(fire.key, attempt, fire.fencing_token, node_id, now, RunOutcome::kRunning);
    running.cause = cause;
    s_.runs[RunKeyOf(fire.key, attempt)] = std::move(running);
    return gnomon::Claim{fire.key, attempt, fire.fencing_token, node_id, fire.lease_expires_at};
  }

  Status ExtendLease(const coord::FireEntry& entry, Duration ttl, Instant now) override {
    s_.fires.at(IdOf(entry.key)).lease_expires_at = now + ttl;
    return Status::Ok();
  }

  Status CloseFire(const coord::FireEntry& entry) override {
    s_.fires.at(IdOf(entry.key)).open = false;
    return Status::Ok();
  }

  Result<std::optional<RunRecord>> LoadRecord(const FireKey& key, int attempt) override {
    auto it = s_.runs.find(RunKeyOf(key, attempt));
    if (it == s_.runs.end()) return std::optional<RunRecord>();
    return std::optional<RunRecord>(it->second);
  }

  Status PutRecord(const RunRecord& record) override {
    FireKey key{record.job_id, record.scheduled_at, record.shard, record.shard_count};
    s_.runs[RunKeyOf(key, record.attempt)] = record;
    return Status::Ok();
  }

  Status PutCheckpoint(const FireKey& key, const std::string& value) override {
    s_.fires.at(IdOf(key)).checkpoint = value;
    return Status::Ok();
  }

  Result<JobState> LoadJobState(const std::string& job_id) override {
    auto it = s_.jobs.find(job_id);
    return it == s_.jobs.end() ? JobState{} : it->second.state;
  }

  Result<std::optional<Instant>> MarkersPrunedBefore(const std::string& job_id) override {
    auto it = s_.jobs.find(job_id);
    return it == s_.jobs.end() ? std::nullopt : it->second.markers_pruned_before;
  }

  Status PutJobState(const std::string& job_id, const JobState& state) override {
    s_.jobs[job_id].state = state;
    return Status::Ok();
  }

  Status BumpJobsVersion(const std::string&) override {
    ++s_.jobs_version;
    s_.jobs_changed.notify_all();
    return Status::Ok();
  }

 private:
  static coord::FireEntry EntryOf(const MemoryState::Fire& fire) {
    return coord::FireEntry{fire.key,     fire.attempt,          fire.fencing_token,
                            fire.node_id, fire.lease_expires_at, fire.open};
  }

  MemoryState& s_;
};

}  // namespace

Result<ClaimOutcome> MemoryFires::Claim(const ClaimRequest& req) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.Claim(req); });
}

Status MemoryFires::Renew(gnomon::Claim& claim, Duration ttl) {
  return coord::StoreRenewal(
      claim, Txn::Run(s_, [&](coord::FireLedger& l) { return l.Renew(claim, ttl); }));
}

Result<gnomon::Claim> MemoryFires::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.NextAttempt(claim, ttl); });
}

Status MemoryFires::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.Report(claim, record, final); });
}

Status MemoryFires::CancelFire(const FireKey& key, const std::string& reason) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.CancelFire(key, reason); });
}

Result<gnomon::Claim> MemoryFires::RerunFire(const FireKey& key, const std::string& node_id,
                                             Duration ttl, const std::string& cause) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.RerunFire(key, node_id, ttl, cause); });
}

Result<std::vector<ExpiredFire>> MemoryFires::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::lock_guard<std::mutex> lock(s_.mu);
  const Instant now = s_.clock.Now();
  std::vector<ExpiredFire> out;
  for (const auto& [id, fire] : s_.fires) {
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

Result<std::optional<gnomon::Claim>> MemoryFires::ResolveLost(const ExpiredFire& expired,
                                                              const std::string& node_id,
                                                              LostPolicy policy, Duration ttl) {
  return Txn::Run(
      s_, [&](coord::FireLedger& l) { return l.ResolveLost(expired, node_id, policy, ttl); });
}

Status MemoryFires::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                  const std::string& reason) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.RecordSkipped(fire, node_id, reason); });
}

Status MemoryFires::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.SaveCheckpoint(claim, value); });
}

Status MemoryFires::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Txn::Run(s_, [&](coord::FireLedger& l) { return l.SaveLiveOutput(claim, output); });
}

Result<std::optional<std::string>> MemoryFires::LoadCheckpoint(const FireKey& fire) {
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.fires.find(IdOf(fire));
  if (it == s_.fires.end()) return std::optional<std::string>();
  return it->second.checkpoint;
}

Result<std::vector<bool>> MemoryFires::FiresRecorded(const std::vector<FireKey>& fires) {
  for (const FireKey& f : fires) GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
  std::lock_guard<std::mutex> lock(s_.mu);
  std::vector<bool> out;
  out.reserve(fires.size());
  for (const FireKey& f : fires) out.push_back(s_.fires.count(IdOf(f)) > 0);
  return out;
}

}  // namespace gnomon::coord::memory

#include "src/coord/etcd/etcd_fires.h"

#include <algorithm>
#include <type_traits>

#include "src/coord/coordinator_util.h"
#include "src/coord/etcd/etcd_ledger_txn.h"

namespace gnomon::coord::etcd {
namespace {

using R = ClaimOutcome::Result;

// Claims whose answer was lost, remembered for adoption (see EtcdFires::Claim).
constexpr size_t kMaxUncertainClaims = 1000;

// Sets the token of a claim started in a commit (token 0) to the commit's revision.
void FillToken(gnomon::Claim& claim, int64_t revision) {
  if (claim.fencing_token == 0) claim.fencing_token = revision;
}
void FillToken(std::optional<gnomon::Claim>& claim, int64_t revision) {
  if (claim) FillToken(*claim, revision);
}
void FillToken(ClaimOutcome& out, int64_t revision) { FillToken(out.claim, revision); }
void FillToken(Instant&, int64_t) {}
void FillToken(Status&, int64_t) {}
template <class T>
void FillToken(Result<T>& r, int64_t revision) {
  if (r.ok()) FillToken(*r, revision);
}

}  // namespace

template <class Op>
auto EtcdFires::Run(const std::string& what, const FireKey& fire, Op op) {
  using Out = std::invoke_result_t<Op, FireLedger&>;
  std::optional<EtcdKv::Lease> lease;
  for (int round = 0; round < kMaxRounds; ++round) {
    EtcdLedgerTxn txn(kv_, keys_, now_, lease);
    FireLedger ledger(txn);
    Out out = op(ledger);
    // An error, or an answer that changes nothing (already claimed, too early, ...).
    if (!StatusOf(out).ok() || txn.writes().empty()) return out;
    bool maybe_applied = false;
    Result<EtcdKv::Committed> c = kv_.Commit(
        txn.snapshot(), txn.writes(),
        txn.adds_records() ? history_.CountOps(fire.job_id) : json::array(), &maybe_applied);
    if (!c.ok()) {
      if (maybe_applied && txn.claim_lease()) {
        RememberUncertain(keys_.FireMarkerKey(fire), *txn.claim_lease());
      }
      return Out(c.status());
    }
    if (!c->succeeded) continue;
    FillToken(out, c->revision);
    if (txn.adds_records()) history_.TrimAfter(fire.job_id, *c);
    return out;
  }
  return Out(kv_.Contention(what + " " + fire.RunId()));
}

Result<ClaimOutcome> EtcdFires::Claim(const ClaimRequest& req) {
  Result<ClaimOutcome> out = Run("claim", req.fire, [&](FireLedger& l) { return l.Claim(req); });
  if (!out.ok() || out->result != R::kAlreadyClaimed) return out;
  // Already claimed: perhaps by this node, in a commit whose answer was lost.
  const std::string fk = keys_.FireMarkerKey(req.fire);
  std::optional<int64_t> mine = Uncertain(fk);
  if (!mine) return out;
  Result<std::optional<gnomon::Claim>> adopted = Adopt(req, *mine);
  if (!adopted.ok()) return adopted.status();
  ForgetUncertain(fk);
  if (!*adopted) return out;
  out->result = R::kClaimed;
  out->claim = **adopted;
  return out;
}

Status EtcdFires::Renew(gnomon::Claim& claim, Duration ttl) {
  return StoreRenewal(claim,
                      Run("renew", claim.fire, [&](FireLedger& l) { return l.Renew(claim, ttl); }));
}

Result<gnomon::Claim> EtcdFires::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Run("next attempt of", claim.fire,
             [&](FireLedger& l) { return l.NextAttempt(claim, ttl); });
}

Status EtcdFires::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Run("report", claim.fire, [&](FireLedger& l) { return l.Report(claim, record, final); });
}

Result<std::optional<gnomon::Claim>> EtcdFires::ResolveLost(const ExpiredFire& expired,
                                                            const std::string& node_id,
                                                            LostPolicy policy, Duration ttl) {
  return Run("resolve lost", expired.fire,
             [&](FireLedger& l) { return l.ResolveLost(expired, node_id, policy, ttl); });
}

Status EtcdFires::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                const std::string& reason) {
  return Run("record skipped", fire,
             [&](FireLedger& l) { return l.RecordSkipped(fire, node_id, reason); });
}

Status EtcdFires::CancelFire(const FireKey& fire, const std::string& reason) {
  return Run("cancel", fire, [&](FireLedger& l) { return l.CancelFire(fire, reason); });
}

Result<gnomon::Claim> EtcdFires::RerunFire(const FireKey& fire, const std::string& node_id,
                                           Duration ttl, const std::string& cause) {
  return Run("rerun", fire, [&](FireLedger& l) { return l.RerunFire(fire, node_id, ttl, cause); });
}

Status EtcdFires::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Run("save checkpoint", claim.fire,
             [&](FireLedger& l) { return l.SaveCheckpoint(claim, value); });
}

Status EtcdFires::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Run("save live output", claim.fire,
             [&](FireLedger& l) { return l.SaveLiveOutput(claim, output); });
}

Result<std::vector<ExpiredFire>> EtcdFires::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  Snapshot s;
  const std::string open = keys_.prefix() + "open/";
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {}, {open, keys_.prefix() + "live/"}));
  const Instant now = now_();
  std::vector<ExpiredFire> out;
  for (const Kv& kv : s.prefixes[open]) {
    KeyPos pos;
    if (!ParseFireTail(std::string_view(kv.key).substr(open.size()), pos)) continue;
    FireRec f = DecodeFire(kv.value);
    ExpiredFire e;
    e.fire.job_id = pos.job;
    e.fire.scheduled_at = Instant::FromUnixMillis(pos.ms);
    e.fire.shard = pos.shard;
    e.fire.shard_count = f.sc;
    if (Holds(s, keys_, e.fire, f, now)) continue;
    e.attempt = f.att;
    e.node_id = f.node;
    // The deadline, or now when the etcd lease ended first.
    e.lease_expired_at = std::min(Instant::FromUnixMillis(f.lease), now);
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const ExpiredFire& a, const ExpiredFire& b) {
    return a.lease_expired_at < b.lease_expired_at;
  });
  if (out.size() > static_cast<size_t>(*page)) out.resize(*page);
  std::vector<std::string> records;
  for (const ExpiredFire& e : out) records.push_back(keys_.RunKey(e.fire, e.attempt));
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, records));
  for (ExpiredFire& e : out) e.fencing_token = TokenOf(s, keys_, e.fire, e.attempt);
  return out;
}

Result<std::optional<gnomon::Claim>> EtcdFires::Adopt(const ClaimRequest& req, int64_t lid) {
  const FireKey& fire = req.fire;
  const std::string ok = keys_.OpenKey(fire);
  for (int round = 0; round < kMaxRounds; ++round) {
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(kv_.Read(s, {ok, keys_.LiveKey(fire), keys_.RunKey(fire, 1)}));
    if (!s.Has(ok)) return std::optional<gnomon::Claim>();
    FireRec f = DecodeFire(s.Value(ok));
    const int64_t token = TokenOf(s, keys_, fire, 1);
    if (f.node != req.node_id || f.att != 1 || f.lid != lid || token == 0 ||
        !s.Has(keys_.LiveKey(fire))) {
      return std::optional<gnomon::Claim>();
    }
    Result<bool> alive = kv_.KeepAlive(lid);
    if (!alive.ok()) return alive.status();
    if (!*alive) return std::optional<gnomon::Claim>();
    const Instant now = now_();
    f.lease = (now + req.lease_ttl).unix_millis();
    Writes w;
    w.Put(ok, Encode(f));
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
    if (!c->succeeded) continue;
    FireKey adopted = fire;
    adopted.shard_count = f.sc;
    return std::optional<gnomon::Claim>(
        gnomon::Claim{adopted, 1, token, req.node_id, now + req.lease_ttl});
  }
  return kv_.Contention("adopt " + fire.RunId());
}

Result<std::vector<bool>> EtcdFires::FiresRecorded(const std::vector<FireKey>& fires) {
  std::vector<std::string> keys;
  for (const FireKey& f : fires) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
    keys.push_back(keys_.FireMarkerKey(f));
  }
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, keys));
  std::vector<bool> out;
  for (const std::string& key : keys) out.push_back(s.Has(key));
  return out;
}

Result<std::optional<std::string>> EtcdFires::LoadCheckpoint(const FireKey& fire) {
  Snapshot s;
  const std::string key = keys_.CheckpointKey(fire);
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {key}));
  if (!s.Has(key)) return std::optional<std::string>();
  return std::optional<std::string>(s.Value(key));
}

void EtcdFires::RememberUncertain(const std::string& fire_key, int64_t lease_id) {
  std::lock_guard<std::mutex> lock(uncertain_mu_);
  if (uncertain_.size() >= kMaxUncertainClaims) uncertain_.erase(uncertain_.begin());
  uncertain_[fire_key] = lease_id;
}
std::optional<int64_t> EtcdFires::Uncertain(const std::string& fire_key) {
  std::lock_guard<std::mutex> lock(uncertain_mu_);
  auto it = uncertain_.find(fire_key);
  if (it == uncertain_.end()) return std::nullopt;
  return it->second;
}
void EtcdFires::ForgetUncertain(const std::string& fire_key) {
  std::lock_guard<std::mutex> lock(uncertain_mu_);
  uncertain_.erase(fire_key);
}

}  // namespace gnomon::coord::etcd

#include "src/coord/etcd/etcd_ledger_txn.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

int64_t TokenOf(const Snapshot& s, const EtcdKeyspace& keys, const FireKey& fire, int attempt) {
  const Kv* kv = s.Find(keys.RunKey(fire, attempt));
  return kv ? kv->create_revision : 0;
}

bool Holds(const Snapshot& s, const EtcdKeyspace& keys, const FireKey& fire, const FireRec& f,
           Instant now) {
  return s.Has(keys.LiveKey(fire)) && f.lease > now.unix_millis();
}

Status EtcdLedgerTxn::Ensure(std::vector<std::string> keys, std::vector<std::string> prefixes) {
  std::erase_if(keys, [&](const std::string& k) { return s_.kvs.contains(k); });
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::erase_if(prefixes, [&](const std::string& p) { return s_.prefixes.contains(p); });
  if (keys.empty() && prefixes.empty()) return Status::Ok();
  return kv_.Read(s_, keys, prefixes);
}

Status EtcdLedgerTxn::Prefetch(const FireKey& fire, int attempt, bool job_state, bool live_fires) {
  std::vector<std::string> keys = {keys_.FireMarkerKey(fire), keys_.OpenKey(fire),
                                   keys_.LiveKey(fire)};
  if (attempt > 0) keys.push_back(keys_.RunKey(fire, attempt));
  if (job_state) keys.push_back(keys_.StateKey(fire.job_id));
  std::vector<std::string> prefixes;
  if (live_fires) prefixes = {keys_.OpenPrefix(fire.job_id), keys_.LivePrefix(fire.job_id)};
  return Ensure(std::move(keys), std::move(prefixes));
}

Result<std::optional<FireEntry>> EtcdLedgerTxn::LoadFire(const FireKey& fire, int attempt_hint) {
  const std::string fk = keys_.FireMarkerKey(fire);
  const std::string ok = keys_.OpenKey(fire);
  std::vector<std::string> keys = {fk, ok, keys_.LiveKey(fire)};
  if (attempt_hint > 0) keys.push_back(keys_.RunKey(fire, attempt_hint));
  GNOMON_RETURN_IF_ERROR(Ensure(std::move(keys)));
  if (!s_.Has(fk) && !s_.Has(ok)) return std::optional<FireEntry>();
  FireEntry e;
  e.key = fire;
  if (!s_.Has(ok)) {
    // Closed: the marker keeps the shard count and the node that claimed or skipped it; the
    // last attempt is in the history only (LastAttempt).
    const FireRec marker = DecodeFire(s_.Value(fk));
    e.key.shard_count = marker.sc;
    e.attempt = 0;
    e.node_id = marker.node;
    return std::optional<FireEntry>(std::move(e));
  }
  const FireRec f = DecodeFire(s_.Value(ok));
  open_[ok] = f;
  e.key.shard_count = f.sc;
  e.attempt = f.att;
  e.node_id = f.node;
  e.lease_expires_at = Instant::FromUnixMillis(f.lease);
  e.open = true;
  e.backend_lease = s_.Has(keys_.LiveKey(fire));
  GNOMON_RETURN_IF_ERROR(Ensure({keys_.RunKey(fire, f.att)}));
  e.fencing_token = TokenOf(s_, keys_, fire, f.att);
  return std::optional<FireEntry>(std::move(e));
}

Result<std::vector<FireEntry>> EtcdLedgerTxn::LiveFires(const FireKey& fire, Instant now) {
  const std::string open = keys_.OpenPrefix(fire.job_id);
  GNOMON_RETURN_IF_ERROR(Ensure({}, {open, keys_.LivePrefix(fire.job_id)}));
  std::vector<FireEntry> out;
  std::vector<std::string> records;
  for (const Kv& kv : s_.prefixes[open]) {
    KeyPos pos;
    if (!ParseFireTail(std::string_view(kv.key).substr(keys_.prefix().size() + 5), pos)) continue;
    FireEntry e;
    e.key.job_id = fire.job_id;
    e.key.scheduled_at = Instant::FromUnixMillis(pos.ms);
    e.key.shard = pos.shard;
    const FireRec other = DecodeFire(kv.value);
    e.key.shard_count = other.sc;
    if (pos.ms == fire.scheduled_at.unix_millis() || !Holds(s_, keys_, e.key, other, now)) {
      continue;
    }
    open_[kv.key] = other;
    e.attempt = other.att;
    e.node_id = other.node;
    e.lease_expires_at = Instant::FromUnixMillis(other.lease);
    e.open = true;
    records.push_back(keys_.RunKey(e.key, e.attempt));
    out.push_back(std::move(e));
  }
  // Their records, for the ledger to close, in one request.
  GNOMON_RETURN_IF_ERROR(Ensure(std::move(records)));
  for (FireEntry& e : out) e.fencing_token = TokenOf(s_, keys_, e.key, e.attempt);
  return out;
}

Result<int> EtcdLedgerTxn::LastAttempt(const FireEntry& fire) {
  // The fire's newest record names its last attempt (records sort newest attempt first).
  const std::string first = keys_.RunKey(fire.key, 1);
  const std::string prefix = first.substr(0, first.rfind(' ') + 1);
  int last = 0;
  GNOMON_RETURN_IF_ERROR(kv_.Scan(prefix, PrefixEnd(prefix), 1, false, [&](const Kv& kv) {
    Result<RunRecord> r = DecodeRecord(kv);
    if (r.ok()) last = r->attempt;
    return false;
  }));
  return last;
}

Status EtcdLedgerTxn::CreateFire(const FireKey& fire, const std::string& node_id, Instant) {
  // The permanent marker that the fire was claimed or skipped.
  FireRec f;
  f.sc = fire.shard_count;
  f.node = node_id;
  w_.Put(keys_.FireMarkerKey(fire), Encode(f));
  created_fire_ = true;
  adds_records_ = true;  // its first record follows
  return Status::Ok();
}

// An open key with the deadline, a live key attached to the attempt's etcd lease and a running
// record.
Result<Claim> EtcdLedgerTxn::StartAttempt(const FireKey& fire, int attempt,
                                          const std::string& node_id, Duration ttl, Instant now,
                                          const std::string& cause) {
  Result<EtcdKv::Lease> lease = kv_.LeaseFor(lease_, ttl);
  if (!lease.ok()) return lease.status();
  FireRec f;
  f.sc = fire.shard_count;
  f.att = attempt;
  f.node = node_id;
  f.lease = (now + ttl).unix_millis();
  f.lid = lease->id;
  f.lttl = lease->ttl_s;
  w_.Put(keys_.OpenKey(fire), Encode(f));
  w_.Put(keys_.LiveKey(fire), node_id, lease->id);
  RunRecord running = NewRecord(fire, attempt, 0, node_id, now, RunOutcome::kRunning);
  running.cause = cause;
  GNOMON_RETURN_IF_ERROR(PutRecord(running));
  adds_records_ = true;
  if (created_fire_ && attempt == 1) claim_lease_ = lease->id;
  return Claim{fire, attempt, 0, node_id, now + ttl, cause};
}

// A keepalive of the attempt's etcd lease plus the new deadline in its open key (a renewal
// asking for more than the lease's TTL moves the live key to a new lease).
Status EtcdLedgerTxn::ExtendLease(const FireEntry& fire, Duration ttl, Instant now) {
  const std::string ok = keys_.OpenKey(fire.key);
  FireRec f = open_.at(ok);
  Result<bool> alive = kv_.KeepAlive(f.lid);
  if (!alive.ok()) return alive.status();
  if (!*alive) {
    return LeaseLostError(fire.key.RunId() + " (token " + std::to_string(fire.fencing_token) +
                          "): its etcd lease ended");
  }
  if (std::chrono::seconds(f.lttl) < ttl) {
    Result<EtcdKv::Lease> bigger = kv_.LeaseFor(lease_, ttl);
    if (!bigger.ok()) return bigger.status();
    f.lid = bigger->id;
    f.lttl = bigger->ttl_s;
    w_.Put(keys_.LiveKey(fire.key), fire.node_id, bigger->id);
  }
  f.lease = (now + ttl).unix_millis();
  w_.Put(ok, Encode(f));
  return Status::Ok();
}

// The attempt's open and live keys go.
Status EtcdLedgerTxn::CloseFire(const FireEntry& fire) {
  w_.Delete(keys_.OpenKey(fire.key));
  w_.Delete(keys_.LiveKey(fire.key));
  return Status::Ok();
}

Result<std::optional<RunRecord>> EtcdLedgerTxn::LoadRecord(const FireKey& fire, int attempt) {
  const std::string key = keys_.RunKey(fire, attempt);
  GNOMON_RETURN_IF_ERROR(Ensure({key}));
  const Kv* kv = s_.Find(key);
  if (!kv) return std::optional<RunRecord>();
  Result<RunRecord> r = DecodeRecord(*kv);
  if (!r.ok()) return std::optional<RunRecord>();  // unreadable: left as it is
  return std::optional<RunRecord>(std::move(*r));
}

// A Put keeps the key's create revision, which is the attempt's token.
Status EtcdLedgerTxn::PutRecord(const RunRecord& r) {
  const int64_t ms = r.scheduled_at.unix_millis();
  w_.Put(keys_.RunKey(r.job_id, ms, r.shard, r.attempt), Encode(r));
  w_.Put(keys_.IndexKey(r.job_id, ms, r.shard, r.attempt), std::string(ToString(r.outcome)));
  return Status::Ok();
}

Status EtcdLedgerTxn::PutCheckpoint(const FireKey& fire, const std::string& value) {
  w_.Put(keys_.CheckpointKey(fire), value);
  return Status::Ok();
}

Result<JobState> EtcdLedgerTxn::LoadJobState(const std::string& job_id) {
  const std::string sk = keys_.StateKey(job_id);
  GNOMON_RETURN_IF_ERROR(Ensure({sk}));
  return ToJobState(DecodeState(s_.Value(sk)));
}

Result<std::optional<Instant>> EtcdLedgerTxn::MarkersPrunedBefore(const std::string& job_id) {
  const std::string sk = keys_.StateKey(job_id);
  GNOMON_RETURN_IF_ERROR(Ensure({sk}));
  const std::optional<int64_t> ms = DecodeState(s_.Value(sk)).pruned;
  return ms ? std::optional<Instant>(Instant::FromUnixMillis(*ms)) : std::nullopt;
}

Status EtcdLedgerTxn::PutJobState(const std::string& job_id, const JobState& state) {
  // The prune cutoff is not part of JobState: kept as read.
  const std::string sk = keys_.StateKey(job_id);
  GNOMON_RETURN_IF_ERROR(Ensure({sk}));
  StateRec rec = ToStateRec(state);
  rec.pruned = DecodeState(s_.Value(sk)).pruned;
  w_.Put(sk, Encode(rec));
  return Status::Ok();
}

Status EtcdLedgerTxn::BumpJobsVersion(const std::string& job_id) {
  w_.Put(keys_.JobsVersionKey(), job_id);
  return Status::Ok();
}

}  // namespace gnomon::coord::etcd

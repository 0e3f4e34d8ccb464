// The etcd backend's storage format (internal): the key layout under the configured prefix, the
// JSON values of fire, state and history records, and the parsers of the gateway's answers.
// Keep it: keyspaces written by earlier releases must keep working (keys and value encodings
// exactly as here).
//
// Keys (<p> = EtcdOptions::prefix, instants as biased unix ms, padded so that keys sort):
//   <p>fire/<job>/<ms> <shard>   the fire marker: written once when claimed or skipped (FireRec)
//   <p>open/<job>/<ms> <shard>   the attempt holding the fire: attempt, holder, deadline (FireRec)
//   <p>live/<job>/<ms> <shard>   the holder, attached to the attempt's etcd lease
//   <p>cp/<job>/<ms> <shard>     the fire's checkpoint
//   <p>runs/<~ms> <job> <shard> <~att>  a history record (JSON); <p>jobruns/<job>/... its index
//   <p>state/<job>               the job's state (StateRec); <p>jobsver, <p>jobs/, <p>nodes/,
//   <p>audit/, <p>auditfail/, <p>auditseq: definitions, nodes and the audit log.
//
// Thread safety: pure functions and an immutable EtcdKeyspace.
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_KEYSPACE_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_KEYSPACE_H_

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gnomon/coordinator.h"

namespace gnomon::coord::etcd {

using json = nlohmann::json;

// Offset that makes unix ms non-negative in keys: instants within +-158,000 years.
inline constexpr int64_t kBias = 5'000'000'000'000'000;

// `v` in decimal, zero-padded to `width`.
std::string Pad(int64_t v, int width);
inline std::string Asc(int64_t ms) { return Pad(ms + kBias, 17); }
inline std::string Desc(int64_t ms) { return Pad(kBias - ms, 17); }
inline std::string Inv(int attempt) { return Pad(INT32_MAX - attempt, 10); }
// Whether `s` is exactly a decimal int64 (stored in `out`).
bool ParseI64(std::string_view s, int64_t& out);
// The first key after every key starting with `prefix` (etcd's range_end for a prefix).
std::string PrefixEnd(std::string prefix);
// An int64 field of a gateway response (int64s come as strings; absent means 0).
int64_t I64(const json& j, const char* field);

struct Kv {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;     // 0 = absent
  int64_t create_revision = 0;  // the revision of the txn that created the key
};

// A key-value of a gateway answer (key and value base64-decoded).
Result<Kv> ParseKv(const json& j);
// A range request op for `key` (or [key, end)), with `extra` fields.
json RangeOp(const std::string& key, const std::string& end = "", json extra = json::object());

// A fire's claim. The fire marker (written once, when the fire is claimed or skipped) holds sc
// and node; while an attempt holds the fire, its open key holds all of it. The attempt's token
// is not stored here: it is the revision of the txn that started the attempt, which is the
// create_revision of the attempt's history record.
struct FireRec {
  int sc = 1;
  int att = 1;
  std::string node;
  int64_t lease = 0;  // deadline, unix ms, backend clock
  int64_t lid = 0;    // the attempt's etcd lease (its live key is attached to it)
  int64_t lttl = 0;   // that lease's granted TTL, seconds
};
std::string Encode(const FireRec& f);
FireRec DecodeFire(const std::string& text);

// A job's state.
struct StateRec {
  bool paused = false;
  std::string reason;
  int fails = 0;
  std::optional<int64_t> last;  // unix ms
  // The latest PruneHistory cutoff that dropped fire markers (unix ms): claims before it
  // are refused. Not part of JobState: the ledger reads it apart.
  std::optional<int64_t> pruned;
};
std::string Encode(const StateRec& s);
StateRec DecodeState(const std::string& text);
JobState ToJobState(const StateRec& s);
StateRec ToStateRec(const JobState& s);

std::string Encode(const RunRecord& r);
Result<RunRecord> DecodeRecord(const std::string& text);
// A stored history record. A record written when its attempt started carries token 0: the
// token is the revision of that txn, i.e. the record key's create_revision.
Result<RunRecord> DecodeRecord(const Kv& kv);

// The position (scheduled ms, shard, attempt) encoded in the tail of a record key.
struct KeyPos {
  std::string job;
  int64_t ms = 0;
  int shard = 0;
  int attempt = 1;
};
// Parses "<~ms> <shard> <~att>" (per-job index tail).
bool ParseIndexTail(std::string_view tail, KeyPos& pos);
// Parses "<~ms> <job> <shard> <~att>" (global record key tail).
bool ParseRunTail(std::string_view tail, KeyPos& pos);
// Parses "<job>/<ms> <shard>" (fire, live and checkpoint key tails).
bool ParseFireTail(std::string_view tail, KeyPos& pos);

// The keys under one prefix (which ends with '/').
class EtcdKeyspace {
 public:
  explicit EtcdKeyspace(std::string prefix) : p_(std::move(prefix)) {}
  const std::string& prefix() const { return p_; }

  std::string StateKey(const std::string& job) const { return p_ + "state/" + job; }
  std::string FireTail(const FireKey& f) const {
    return f.job_id + "/" + Asc(f.scheduled_at.unix_millis()) + " " + Pad(f.shard, 10);
  }
  std::string FireMarkerKey(const FireKey& f) const { return p_ + "fire/" + FireTail(f); }
  std::string LiveKey(const FireKey& f) const { return p_ + "live/" + FireTail(f); }
  std::string LivePrefix(const std::string& job) const { return p_ + "live/" + job + "/"; }
  std::string OpenKey(const FireKey& f) const { return p_ + "open/" + FireTail(f); }
  std::string OpenPrefix(const std::string& job) const { return p_ + "open/" + job + "/"; }
  std::string CheckpointKey(const FireKey& f) const { return p_ + "cp/" + FireTail(f); }
  std::string RunsPrefix() const { return p_ + "runs/"; }
  std::string RunKey(const std::string& job, int64_t ms, int shard, int attempt) const {
    return RunsPrefix() + Desc(ms) + " " + job + " " + Pad(shard, 10) + " " + Inv(attempt);
  }
  std::string RunKey(const FireKey& f, int attempt) const {
    return RunKey(f.job_id, f.scheduled_at.unix_millis(), f.shard, attempt);
  }
  std::string IndexPrefix(const std::string& job) const { return p_ + "jobruns/" + job + "/"; }
  std::string IndexKey(const std::string& job, int64_t ms, int shard, int attempt) const {
    return IndexPrefix(job) + Desc(ms) + " " + Pad(shard, 10) + " " + Inv(attempt);
  }
  std::string JobKey(const std::string& job) const { return p_ + "jobs/" + job; }
  std::string JobsVersionKey() const { return p_ + "jobsver"; }
  std::string NodeKey(const std::string& node) const { return p_ + "nodes/" + node; }
  std::string AuditSeqKey() const { return p_ + "auditseq"; }
  // Records of calls that were done under audit/, of the others (AuditResult other than kOk)
  // under auditfail/: each prefix is capped apart.
  std::string AuditPrefix(bool failed) const { return p_ + (failed ? "auditfail/" : "audit/"); }
  std::string AuditKey(bool failed, int64_t seq) const {
    return AuditPrefix(failed) + Pad(seq, 20);
  }

 private:
  std::string p_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_KEYSPACE_H_

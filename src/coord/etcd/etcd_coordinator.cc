#include "gnomon/etcd_coordinator.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "src/coord/coordinator_util.h"
#include "src/coord/etcd/etcd_client.h"

namespace gnomon {
namespace {

using json = nlohmann::json;
using R = ClaimOutcome::Result;

// Rounds of an optimistic transaction before giving up with Unavailable (each round that fails
// means another caller committed a conflicting change, so the system as a whole progresses).
constexpr int kMaxRounds = 64;
// Offset that makes unix ms non-negative in keys: instants within +-158,000 years.
constexpr int64_t kBias = 5'000'000'000'000'000;
// Keys deleted per trimming/pruning txn (etcd's default --max-txn-ops is 128).
constexpr size_t kDeleteBatch = 50;
// Point reads per txn when fetching many keys.
constexpr size_t kReadBatch = 100;
// Time Open() may spend calibrating the server clock estimate (two sweeps take 1-2 s).
constexpr Duration kOpenCalibrationBudget = std::chrono::milliseconds(2200);
// Time one later recalibration may take, and the pause after one that failed or fell short.
constexpr Duration kCalibrationBudget = std::chrono::seconds(3);
constexpr Duration kCalibrationPause = std::chrono::seconds(1);
// Claims whose answer was lost, remembered for adoption (see Claim).
constexpr size_t kMaxUncertainClaims = 1000;

std::string Pad(int64_t v, int width) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}
std::string Asc(int64_t ms) { return Pad(ms + kBias, 17); }
std::string Desc(int64_t ms) { return Pad(kBias - ms, 17); }
std::string Inv(int attempt) { return Pad(INT32_MAX - attempt, 10); }

bool ParseI64(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// The first key after every key starting with `prefix` (etcd's range_end for a prefix).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char c = static_cast<unsigned char>(prefix.back());
    if (c < 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // the whole key space
}

// An int64 field of a gateway response (int64s come as strings; absent means 0).
int64_t I64(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t v = 0;
  if (it->is_string() && ParseI64(it->get<std::string>(), v)) return v;
  return 0;
}

struct Kv {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;     // 0 = absent
  int64_t create_revision = 0;  // the revision of the txn that created the key
};

Result<Kv> ParseKv(const json& j) {
  Kv kv;
  Result<std::string> key = coord::Base64Decode(j.value("key", ""));
  Result<std::string> value = coord::Base64Decode(j.value("value", ""));
  if (!key.ok() || !value.ok()) return InternalError("etcd: a key or value is not base64");
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  kv.mod_revision = I64(j, "mod_revision");
  kv.create_revision = I64(j, "create_revision");
  return kv;
}

json RangeOp(const std::string& key, const std::string& end = "", json extra = json::object()) {
  json r = std::move(extra);
  r["key"] = coord::Base64Encode(key);
  if (!end.empty()) r["range_end"] = coord::Base64Encode(end);
  return json{{"request_range", std::move(r)}};
}

// The keys read by one round of an optimistic transaction, at (or after) one revision.
struct Snapshot {
  int64_t revision = 0;
  std::map<std::string, Kv> kvs;                    // every key read; absent ones too
  std::map<std::string, std::vector<Kv>> prefixes;  // prefix -> present keys, in key order

  bool Has(const std::string& key) const {
    auto it = kvs.find(key);
    return it != kvs.end() && it->second.mod_revision != 0;
  }
  const Kv* Find(const std::string& key) const {
    auto it = kvs.find(key);
    return it == kvs.end() || it->second.mod_revision == 0 ? nullptr : &it->second;
  }
  const std::string& Value(const std::string& key) const {
    static const std::string kEmpty;
    auto it = kvs.find(key);
    return it == kvs.end() ? kEmpty : it->second.value;
  }
};

// Puts and deletes of one commit (etcd refuses a txn naming a key twice: the last one wins).
class Writes {
 public:
  void Put(const std::string& key, std::string value, int64_t lease = 0) {
    ops_[key] = Op{std::move(value), lease};
  }
  void Delete(const std::string& key) { ops_[key] = std::nullopt; }
  // A range delete [from, to); must not overlap other keys of the txn.
  void DeleteRange(const std::string& from, const std::string& to) {
    ranges_.push_back({from, to});
  }
  json Ops() const {
    json ops = json::array();
    for (const auto& [key, value] : ops_) {
      if (value) {
        json put{{"key", coord::Base64Encode(key)}, {"value", coord::Base64Encode(value->value)}};
        if (value->lease != 0) put["lease"] = std::to_string(value->lease);
        ops.push_back(json{{"request_put", std::move(put)}});
      } else {
        ops.push_back(json{{"request_delete_range", {{"key", coord::Base64Encode(key)}}}});
      }
    }
    for (const auto& [from, to] : ranges_) {
      ops.push_back(
          json{{"request_delete_range",
                {{"key", coord::Base64Encode(from)}, {"range_end", coord::Base64Encode(to)}}}});
    }
    return ops;
  }

 private:
  struct Op {
    std::string value;
    int64_t lease = 0;  // etcd lease the key is attached to (0 = none)
  };
  std::map<std::string, std::optional<Op>> ops_;
  std::vector<std::pair<std::string, std::string>> ranges_;
};

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

std::string Encode(const FireRec& f) {
  return json{{"sc", f.sc},       {"att", f.att}, {"node", f.node},
              {"lease", f.lease}, {"lid", f.lid}, {"lttl", f.lttl}}
      .dump();
}

FireRec DecodeFire(const std::string& text) {
  FireRec f;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return f;
  f.sc = j.value("sc", 1);
  f.att = j.value("att", 1);
  f.node = j.value("node", "");
  f.lease = j.value("lease", int64_t{0});
  f.lid = j.value("lid", int64_t{0});
  f.lttl = j.value("lttl", int64_t{0});
  return f;
}

struct StateRec {
  bool paused = false;
  std::string reason;
  int fails = 0;
  std::optional<int64_t> last;  // unix ms
};

std::string Encode(const StateRec& s) {
  json j{{"paused", s.paused}, {"reason", s.reason}, {"fails", s.fails}};
  if (s.last) j["last"] = *s.last;
  return j.dump();
}

StateRec DecodeState(const std::string& text) {
  StateRec s;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return s;
  s.paused = j.value("paused", false);
  s.reason = j.value("reason", "");
  s.fails = j.value("fails", 0);
  if (j.contains("last")) s.last = j["last"].get<int64_t>();
  return s;
}

std::string Encode(const RunRecord& r) {
  json j{{"run", r.run_id},
         {"job", r.job_id},
         {"ms", r.scheduled_at.unix_millis()},
         {"shard", r.shard},
         {"sc", r.shard_count},
         {"att", r.attempt},
         {"tok", r.fencing_token},
         {"node", r.node_id},
         {"start", r.started_at.unix_millis()},
         {"fin", r.finished_at.unix_millis()},
         {"outcome", std::string(ToString(r.outcome))},
         {"err", coord::Base64Encode(r.error)},
         {"output", coord::Base64Encode(r.output)},
         {"skip", r.skip_reason}};
  if (r.exit_code) j["exit"] = *r.exit_code;
  if (!r.params.empty()) j["params"] = r.params;
  if (!r.cause.empty()) j["cause"] = r.cause;
  return j.dump();
}

Result<RunRecord> DecodeRecord(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return InternalError("etcd: a history record is not JSON");
  RunRecord r;
  r.run_id = j.value("run", "");
  r.job_id = j.value("job", "");
  r.scheduled_at = Instant::FromUnixMillis(j.value("ms", int64_t{0}));
  r.shard = j.value("shard", 0);
  r.shard_count = j.value("sc", 1);
  r.attempt = j.value("att", 1);
  r.fencing_token = j.value("tok", int64_t{0});
  r.node_id = j.value("node", "");
  r.started_at = Instant::FromUnixMillis(j.value("start", int64_t{0}));
  r.finished_at = Instant::FromUnixMillis(j.value("fin", int64_t{0}));
  Result<RunOutcome> outcome = ParseRunOutcome(j.value("outcome", ""));
  if (!outcome.ok()) return InternalError("etcd: a history record has a bad outcome");
  r.outcome = *outcome;
  Result<std::string> err = coord::Base64Decode(j.value("err", ""));
  Result<std::string> output = coord::Base64Decode(j.value("output", ""));
  if (!err.ok() || !output.ok()) return InternalError("etcd: a history record is corrupt");
  r.error = std::move(*err);
  r.output = std::move(*output);
  r.skip_reason = j.value("skip", "");
  r.params = j.value("params", "");
  r.cause = j.value("cause", "");
  if (j.contains("exit")) r.exit_code = j["exit"].get<int>();
  return r;
}

// A stored history record. A record written when its attempt started carries token 0: the
// token is the revision of that txn, i.e. the record key's create_revision.
Result<RunRecord> DecodeRecord(const Kv& kv) {
  Result<RunRecord> r = DecodeRecord(kv.value);
  if (r.ok() && r->fencing_token == 0 && r->outcome != RunOutcome::kSkipped) {
    r->fencing_token = kv.create_revision;
  }
  return r;
}

// The position (scheduled ms, shard, attempt) encoded in the tail of a record key.
struct KeyPos {
  std::string job;
  int64_t ms = 0;
  int shard = 0;
  int attempt = 1;
};

// Parses "<~ms> <shard> <~att>" (per-job index tail).
bool ParseIndexTail(std::string_view tail, KeyPos& pos) {
  if (tail.size() != 17 + 1 + 10 + 1 + 10) return false;
  int64_t inv_ms = 0, shard = 0, inv_att = 0;
  if (!ParseI64(tail.substr(0, 17), inv_ms) || !ParseI64(tail.substr(18, 10), shard) ||
      !ParseI64(tail.substr(29, 10), inv_att)) {
    return false;
  }
  pos.ms = kBias - inv_ms;
  pos.shard = static_cast<int>(shard);
  pos.attempt = static_cast<int>(INT32_MAX - inv_att);
  return true;
}

// Parses "<~ms> <job> <shard> <~att>" (global record key tail).
bool ParseRunTail(std::string_view tail, KeyPos& pos) {
  if (tail.size() < 17 + 1 + 1 + 1 + 10 + 1 + 10) return false;
  const size_t job_end = tail.size() - 22;
  if (tail[17] != ' ' || tail[job_end] != ' ') return false;
  pos.job = std::string(tail.substr(18, job_end - 18));
  std::string index(tail.substr(0, 17));
  index += std::string(tail.substr(job_end));
  return ParseIndexTail(index, pos);
}

// Parses "<job>/<ms> <shard>" (fire, live and checkpoint key tails).
bool ParseFireTail(std::string_view tail, KeyPos& pos) {
  const size_t slash = tail.find('/');
  if (slash == std::string_view::npos || tail.size() != slash + 1 + 17 + 1 + 10) return false;
  pos.job = std::string(tail.substr(0, slash));
  int64_t ms = 0, shard = 0;
  if (!ParseI64(tail.substr(slash + 1, 17), ms) || !ParseI64(tail.substr(slash + 19, 10), shard)) {
    return false;
  }
  pos.ms = ms - kBias;
  pos.shard = static_cast<int>(shard);
  return true;
}

Status ValidateOptions(EtcdOptions& o) {
  if (o.endpoints.empty()) return InvalidArgumentError("etcd: no endpoints");
  for (const auto& [host, port] : o.endpoints) {
    if (host.empty()) return InvalidArgumentError("etcd: an endpoint has no host");
    if (port < 1 || port > 65535) {
      return InvalidArgumentError("etcd: endpoint " + host + ": port " + std::to_string(port) +
                                  " is not 1-65535");
    }
  }
  if (o.prefix.empty()) return InvalidArgumentError("etcd: prefix is empty");
  if (o.prefix.size() > 200) return InvalidArgumentError("etcd: prefix is longer than 200");
  for (char c : o.prefix) {
    if (c <= ' ' || c > '~') {
      return InvalidArgumentError("etcd: prefix \"" + o.prefix +
                                  "\" has a space or non-printable character");
    }
  }
  if (o.prefix.back() != '/') o.prefix += '/';
  if (o.connect_timeout <= Duration(0) || o.io_timeout <= Duration(0)) {
    return InvalidArgumentError("etcd: connect_timeout and io_timeout must be positive");
  }
  if (o.reconnect_backoff_min <= Duration(0) || o.reconnect_backoff_max < o.reconnect_backoff_min) {
    return InvalidArgumentError("etcd: need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (o.max_records_per_job < 1 || o.max_records_total < 1) {
    return InvalidArgumentError("etcd: max_records_per_job and max_records_total must be >= 1");
  }
  if (o.max_idle_connections < 1) {
    return InvalidArgumentError("etcd: max_idle_connections must be >= 1");
  }
  if (!o.tls.enabled && o.tls != TlsOptions{}) {
    return InvalidArgumentError("etcd: TLS options need https:// endpoints");
  }
  if (!o.tls.server_name.empty()) {
    return InvalidArgumentError(
        "etcd: tls_server_name is not supported: write each endpoint as its certificate names it");
  }
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return InvalidArgumentError("etcd: tls_cert and tls_key go together");
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

class EtcdCoordinator::Impl {
 public:
  Impl(const EtcdOptions& options, coord::EtcdClientOptions client_options)
      : options_(options), p_(options.prefix) {
    client_options.on_clock_reset = [this] {
      std::lock_guard<std::mutex> lock(keeper_mu_);
      clock_reset_ = true;
      keeper_cv_.notify_all();
    };
    client_ = std::make_unique<coord::EtcdClient>(std::move(client_options));
  }

  // --- Time ----------------------------------------------------------------------------------
  // The backend clock: EtcdOptions::clock when set, else the server clock estimate (this host's
  // clock only before the first response carrying a Date header).
  Instant Now() const {
    if (options_.clock) return options_.clock->Now();
    if (std::optional<coord::ServerClock::Reading> r = client_->ServerNow()) return r->now;
    return SystemClock::Get().Now();
  }
  std::optional<Duration> ClockUncertainty() const {
    if (options_.clock) return std::nullopt;
    std::optional<coord::ServerClock::Reading> r = client_->ServerNow();
    if (!r) return std::nullopt;
    return r->uncertainty;
  }
  // A cheap request whose answer carries the member's Date: a serializable count of a key that
  // never exists.
  json ClockProbe() const {
    return json{
        {"key", coord::Base64Encode(p_ + "clock")}, {"serializable", true}, {"count_only", true}};
  }
  Status CalibrateClock(Duration budget, std::stop_token stop = {}) {
    return client_->CalibrateClock("/v3/kv/range", ClockProbe(), budget, std::move(stop));
  }
  // Keeps the estimate calibrated: sweeps again when it was restarted (a clock step) or drift
  // has widened it to 4 x its target.
  void StartClockKeeper() {
    keeper_ = std::jthread([this](std::stop_token stop) { KeepClock(stop); });
  }
  void KeepClock(std::stop_token stop) {
    std::stop_callback wake(stop, [this] {
      std::lock_guard<std::mutex> lock(keeper_mu_);
      keeper_cv_.notify_all();
    });
    Duration not_before{0};
    while (!stop.stop_requested()) {
      {
        std::unique_lock<std::mutex> lock(keeper_mu_);
        // At most one calibration per kCalibrationPause, even if clocks keep stepping.
        SystemClock::Get().WaitUntilSteady(lock, keeper_cv_, not_before,
                                           [&] { return stop.stop_requested(); });
        const Duration due = client_->ClockStaleAt(client_->ClockTarget() * 4);
        SystemClock::Get().WaitUntilSteady(lock, keeper_cv_, due,
                                           [&] { return stop.stop_requested() || clock_reset_; });
        if (stop.stop_requested()) return;
        clock_reset_ = false;
      }
      (void)CalibrateClock(kCalibrationBudget, stop);  // a failure: the next round retries
      not_before = SystemClock::Get().SteadyNow() + kCalibrationPause;
    }
  }

  // Claims whose commit got no answer (it may have been applied, or be applied later by a
  // server that was frozen): fire marker key -> the etcd lease it attached.
  void RememberUncertain(const std::string& fire_key, int64_t lease_id) {
    std::lock_guard<std::mutex> lock(uncertain_mu_);
    if (uncertain_.size() >= kMaxUncertainClaims) uncertain_.erase(uncertain_.begin());
    uncertain_[fire_key] = lease_id;
  }
  std::optional<int64_t> Uncertain(const std::string& fire_key) {
    std::lock_guard<std::mutex> lock(uncertain_mu_);
    auto it = uncertain_.find(fire_key);
    if (it == uncertain_.end()) return std::nullopt;
    return it->second;
  }
  void ForgetUncertain(const std::string& fire_key) {
    std::lock_guard<std::mutex> lock(uncertain_mu_);
    uncertain_.erase(fire_key);
  }

  // --- Keys ----------------------------------------------------------------------------------
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

  // --- Transport -----------------------------------------------------------------------------
  Result<json> Txn(const json& compares, const json& success, const json& failure,
                   bool* maybe_applied = nullptr) {
    json body = json::object();
    if (!compares.empty()) body["compare"] = compares;
    if (!success.empty()) body["success"] = success;
    if (!failure.empty()) body["failure"] = failure;
    return client_->Call("/v3/kv/txn", body, maybe_applied);
  }

  // Reads `keys` and the keys under each of `prefixes` into `s` (a txn of ranges per
  // kReadBatch keys; the prefixes go with the first).
  Status Read(Snapshot& s, const std::vector<std::string>& keys,
              const std::vector<std::string>& prefixes = {}) {
    size_t start = 0;
    do {
      const size_t end = std::min(keys.size(), start + kReadBatch);
      const bool with_prefixes = start == 0;
      json ops = json::array();
      for (size_t i = start; i < end; ++i) ops.push_back(RangeOp(keys[i]));
      if (with_prefixes) {
        for (const std::string& p : prefixes) ops.push_back(RangeOp(p, PrefixEnd(p)));
      }
      if (ops.empty()) break;
      Result<json> r = Txn(json::array(), ops, json::array());
      if (!r.ok()) return r.status();
      s.revision = std::max(s.revision, I64((*r)["header"], "revision"));
      const json& responses = (*r)["responses"];
      for (size_t i = start; i < end; ++i) {
        Kv kv;
        kv.key = keys[i];
        const json& rr = responses.at(i - start).at("response_range");
        if (rr.contains("kvs") && !rr["kvs"].empty()) {
          Result<Kv> got = ParseKv(rr["kvs"][0]);
          if (!got.ok()) return got.status();
          kv = std::move(*got);
        }
        s.kvs[kv.key] = std::move(kv);
      }
      if (with_prefixes) {
        for (size_t k = 0; k < prefixes.size(); ++k) {
          const json& rr = responses.at(end - start + k).at("response_range");
          std::vector<Kv>& out = s.prefixes[prefixes[k]];
          out.clear();
          if (!rr.contains("kvs")) continue;
          for (const json& item : rr["kvs"]) {
            Result<Kv> got = ParseKv(item);
            if (!got.ok()) return got.status();
            s.kvs[got->key] = *got;
            out.push_back(std::move(*got));
          }
        }
      }
      start = end;
    } while (start < keys.size());
    return Status::Ok();
  }

  struct Committed {
    bool succeeded = false;
    int64_t revision = 0;
    json responses;  // of the success ops: the writes, then `extra`
  };

  // Commits `w` (plus the read-only `extra` ops) if every key of `s` still has the mod_revision
  // it was read at and the further `compares` hold.
  // `maybe_applied`: see EtcdClient::Call.
  Result<Committed> Commit(const Snapshot& s, const Writes& w, const json& extra = json::array(),
                           bool* maybe_applied = nullptr, json compares = json::array()) {
    for (const auto& [key, kv] : s.kvs) {
      compares.push_back(json{{"key", coord::Base64Encode(key)},
                              {"target", "MOD"},
                              {"result", "EQUAL"},
                              {"mod_revision", std::to_string(kv.mod_revision)}});
    }
    json ops = w.Ops();
    const size_t n_writes = ops.size();
    for (const json& op : extra) ops.push_back(op);
    Result<json> r = Txn(compares, ops, json::array(), maybe_applied);
    if (!r.ok()) return r.status();
    Committed c;
    c.succeeded = r->value("succeeded", false);
    c.revision = I64((*r)["header"], "revision");
    if (c.succeeded && r->contains("responses")) {
      c.responses = json::array();
      const json& all = (*r)["responses"];
      for (size_t i = n_writes; i < all.size(); ++i) c.responses.push_back(all[i]);
    }
    return c;
  }

  Status Contention(const std::string& what) {
    return UnavailableError("etcd: " + what + ": gave up after " + std::to_string(kMaxRounds) +
                            " conflicting rounds");
  }

  // Count-only ranges of the job's and all history records, for the caps.
  json CountOps(const std::string& job) const {
    json ops = json::array();
    ops.push_back(RangeOp(IndexPrefix(job), PrefixEnd(IndexPrefix(job)), {{"count_only", true}}));
    ops.push_back(RangeOp(RunsPrefix(), PrefixEnd(RunsPrefix()), {{"count_only", true}}));
    return ops;
  }
  void TrimAfter(const std::string& job, const Committed& c) {
    if (c.responses.size() < 2) return;
    const int64_t job_count = I64(c.responses[0].value("response_range", json::object()), "count");
    const int64_t total = I64(c.responses[1].value("response_range", json::object()), "count");
    // Best effort: a failure leaves a few records too many until the next write.
    if (job_count > options_.max_records_per_job) {
      (void)TrimJob(job, job_count - options_.max_records_per_job);
    }
    if (total > options_.max_records_total) (void)TrimTotal(total - options_.max_records_total);
  }

  // --- Leases --------------------------------------------------------------------------------
  struct Lease {
    int64_t id = 0;
    int64_t ttl_s = 0;  // as granted (etcd raises a TTL below its minimum)
  };
  // A new etcd lease of at least `ttl`, in whole seconds.
  Result<Lease> Grant(Duration ttl) {
    const int64_t secs = std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(ttl).count());
    Result<json> r = client_->Call("/v3/lease/grant", json{{"TTL", std::to_string(secs)}});
    if (!r.ok()) return r.status();
    Lease lease{I64(*r, "ID"), I64(*r, "TTL")};
    if (lease.id == 0 || lease.ttl_s <= 0) {
      return UnavailableError("etcd: lease grant refused: " + r->dump().substr(0, 200));
    }
    return lease;
  }
  // Refreshes lease `id` to its granted TTL: false when etcd no longer has it (it expired or was
  // revoked, and its keys are gone).
  Result<bool> KeepAlive(int64_t id) {
    Result<json> r = client_->Call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}});
    if (!r.ok()) return r.status();
    return I64(r->value("result", json::object()), "TTL") > 0;
  }
  // The lease for this operation's attempt: granted on first use, kept across conflict rounds.
  Result<Lease> LeaseFor(std::optional<Lease>& lease, Duration ttl) {
    if (!lease) {
      Result<Lease> granted = Grant(ttl);
      if (!granted.ok()) return granted.status();
      lease = *granted;
    }
    return *lease;
  }

  // --- Writes shared by several operations ---------------------------------------------------
  void PutRecord(Writes& w, const RunRecord& r) const {
    const int64_t ms = r.scheduled_at.unix_millis();
    w.Put(RunKey(r.job_id, ms, r.shard, r.attempt), Encode(r));
    w.Put(IndexKey(r.job_id, ms, r.shard, r.attempt), std::string(ToString(r.outcome)));
  }
  // The permanent marker that the fire was claimed or skipped.
  void PutMarker(Writes& w, const FireKey& fire, const std::string& node) const {
    FireRec f;
    f.sc = fire.shard_count;
    f.node = node;
    w.Put(FireMarkerKey(fire), Encode(f));
  }
  // Ends the attempt holding `fire`: its open and live keys go.
  void CloseFire(Writes& w, const FireKey& fire) const {
    w.Delete(OpenKey(fire));
    w.Delete(LiveKey(fire));
  }
  static void AdvanceLast(StateRec& st, const FireKey& fire) {
    const int64_t ms = fire.scheduled_at.unix_millis();
    if (!st.last || *st.last < ms) st.last = ms;
  }
  // The writes of a fire recorded as skipped (no claim).
  void SkipWrites(Writes& w, const FireKey& fire, const std::string& node,
                  const std::string& reason, Instant now, StateRec st) const {
    PutMarker(w, fire, node);
    RunRecord r = coord::NewRecord(fire, 1, 0, node, now, RunOutcome::kSkipped);
    r.skip_reason = reason;
    PutRecord(w, r);
    AdvanceLast(st, fire);
    w.Put(StateKey(fire.job_id), Encode(st));
  }
  // Starts attempt `attempt` of `fire` on `lease`: an open key with the deadline, a live key
  // attached to the lease and a running record. The claim's token is the revision of the txn
  // that commits these writes: the caller sets it from the commit.
  gnomon::Claim StartAttempt(Writes& w, const FireKey& fire, int attempt, const std::string& node,
                             Duration ttl, Instant now, const Lease& lease,
                             const std::string& cause = "") const {
    FireRec f;
    f.sc = fire.shard_count;
    f.att = attempt;
    f.node = node;
    f.lease = (now + ttl).unix_millis();
    f.lid = lease.id;
    f.lttl = lease.ttl_s;
    w.Put(OpenKey(fire), Encode(f));
    w.Put(LiveKey(fire), node, lease.id);
    RunRecord running = coord::NewRecord(fire, attempt, 0, node, now, RunOutcome::kRunning);
    running.cause = cause;
    PutRecord(w, running);
    return gnomon::Claim{fire, attempt, 0, node, now + ttl, cause};
  }
  // Closes a still-running record of `fire`'s attempt (read into `s`) with `outcome`.
  void FinishRunning(Writes& w, const Snapshot& s, const FireKey& fire, int attempt,
                     RunOutcome outcome, const std::string& error, Instant now) const {
    const Kv* kv = s.Find(RunKey(fire, attempt));
    if (!kv) return;
    Result<RunRecord> r = DecodeRecord(*kv);
    if (!r.ok() || r->outcome != RunOutcome::kRunning) return;
    r->outcome = outcome;
    r->finished_at = now;
    r->error = error;
    PutRecord(w, *r);
  }
  // The token of the attempt whose record `s` holds (0 when the record is gone).
  int64_t TokenOf(const Snapshot& s, const FireKey& fire, int attempt) const {
    const Kv* kv = s.Find(RunKey(fire, attempt));
    return kv ? kv->create_revision : 0;
  }
  // Whether an attempt whose open record is `f` still holds `fire` at `now`: its etcd lease
  // holds the live key and its deadline has not passed.
  bool Holds(const Snapshot& s, const FireKey& fire, const FireRec& f, Instant now) const {
    return s.Has(LiveKey(fire)) && f.lease > now.unix_millis();
  }

  // The keys Fenced reads for `claim`.
  std::vector<std::string> HoldKeys(const gnomon::Claim& claim) const {
    return {OpenKey(claim.fire), LiveKey(claim.fire), RunKey(claim.fire, claim.attempt)};
  }
  // The open record of `claim`'s fire if `claim` still holds it at `now`, else LeaseLost.
  Result<FireRec> Fenced(const Snapshot& s, const gnomon::Claim& claim, Instant now) const {
    const std::string what =
        claim.fire.RunId() + " (token " + std::to_string(claim.fencing_token) + ")";
    if (!s.Has(OpenKey(claim.fire))) {
      if (!s.Has(RunKey(claim.fire, claim.attempt))) {
        return LeaseLostError(what + ": the fire has no claim");
      }
      return LeaseLostError(what + ": the lease was released or revoked");
    }
    FireRec f = DecodeFire(s.Value(OpenKey(claim.fire)));
    if (f.att != claim.attempt || TokenOf(s, claim.fire, claim.attempt) != claim.fencing_token) {
      return LeaseLostError(what + ": fenced off by attempt " + std::to_string(f.att));
    }
    if (!s.Has(LiveKey(claim.fire))) return LeaseLostError(what + ": its etcd lease ended");
    if (f.lease <= now.unix_millis()) return LeaseLostError(what + ": the lease expired");
    return f;
  }
  // The compare that makes a txn apply only while `claim`'s record is the one its claim created.
  json TokenCompare(const gnomon::Claim& claim) const {
    return json::array({json{{"key", coord::Base64Encode(RunKey(claim.fire, claim.attempt))},
                             {"target", "CREATE"},
                             {"result", "EQUAL"},
                             {"create_revision", std::to_string(claim.fencing_token)}}});
  }

  // --- Operations ----------------------------------------------------------------------------
  Result<ClaimOutcome> Claim(const ClaimRequest& req) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(req));
    const FireKey& fire = req.fire;
    const std::string fk = FireMarkerKey(fire);
    const std::string sk = StateKey(fire.job_id);
    const std::string open = OpenPrefix(fire.job_id);
    std::optional<Lease> lease;
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      std::vector<std::string> prefixes;
      if (req.overlap != OverlapPolicy::kAllow) {
        prefixes = {open, LivePrefix(fire.job_id)};
      }
      GNOMON_RETURN_IF_ERROR(Read(s, {fk, sk}, prefixes));
      const Instant now = Now();
      if (s.Has(fk)) {
        std::optional<int64_t> mine = Uncertain(fk);
        if (!mine) return coord::MakeOutcome(R::kAlreadyClaimed, now);
        Result<std::optional<gnomon::Claim>> adopted = Adopt(req, *mine);
        if (!adopted.ok()) return adopted.status();
        ForgetUncertain(fk);
        if (!*adopted) return coord::MakeOutcome(R::kAlreadyClaimed, now);
        ClaimOutcome out = coord::MakeOutcome(R::kClaimed, now);
        out.claim = **adopted;
        return out;
      }
      if (fire.scheduled_at > now + req.skew_tolerance) {
        return coord::MakeOutcome(R::kTooEarly, now);
      }
      StateRec st = DecodeState(s.Value(sk));
      Writes w;
      ClaimOutcome out;
      bool claimed = false;
      if (st.paused) {
        SkipWrites(w, fire, req.node_id, "paused", now, st);
        out = coord::MakeOutcome(R::kPaused, now);
      } else {
        // Running fires of the job at other instants (sibling shards of this instant run
        // together).
        std::vector<std::pair<FireKey, FireRec>> others;
        for (const Kv& kv : s.prefixes[open]) {
          KeyPos pos;
          if (!ParseFireTail(std::string_view(kv.key).substr(p_.size() + 5), pos)) continue;
          FireKey key;
          key.job_id = fire.job_id;
          key.scheduled_at = Instant::FromUnixMillis(pos.ms);
          key.shard = pos.shard;
          FireRec other = DecodeFire(kv.value);
          key.shard_count = other.sc;
          if (pos.ms == fire.scheduled_at.unix_millis() || !Holds(s, key, other, now)) continue;
          others.emplace_back(std::move(key), std::move(other));
        }
        if (!others.empty() && req.overlap == OverlapPolicy::kForbid) {
          SkipWrites(w, fire, req.node_id, "overlap", now, st);
          out = coord::MakeOutcome(R::kOverlap, now);
        } else {
          Result<Lease> l = LeaseFor(lease, req.lease_ttl);
          if (!l.ok()) return l.status();
          out = coord::MakeOutcome(R::kClaimed, now);
          if (!others.empty()) {  // replace: revoke them
            std::vector<std::string> records;
            for (const auto& [key, other] : others) records.push_back(RunKey(key, other.att));
            GNOMON_RETURN_IF_ERROR(Read(s, records));
            for (const auto& [key, other] : others) {
              FinishRunning(w, s, key, other.att, RunOutcome::kCancelled,
                            "replaced by " + fire.RunId(), now);
              CloseFire(w, key);
              out.replaced.push_back(key);
            }
          }
          AdvanceLast(st, fire);
          PutMarker(w, fire, req.node_id);
          out.claim = StartAttempt(w, fire, 1, req.node_id, req.lease_ttl, now, *l, req.cause);
          w.Put(sk, Encode(st));
          claimed = true;
        }
      }
      bool maybe_applied = false;
      Result<Committed> c = Commit(s, w, CountOps(fire.job_id), &maybe_applied);
      if (!c.ok()) {
        if (claimed && maybe_applied) RememberUncertain(fk, lease->id);
        return c.status();
      }
      if (!c->succeeded) continue;
      if (claimed) out.claim->fencing_token = c->revision;
      TrimAfter(fire.job_id, *c);
      return out;
    }
    return Contention("claim " + fire.RunId());
  }

  // This node claimed `req`'s fire on lease `lid` but the answer was lost. If that claim was
  // applied (late: a frozen server that resumed) and its lease still holds the fire, it is this
  // node's: adopt it with a fresh lease rather than leave an orphan for ResolveLost.
  Result<std::optional<gnomon::Claim>> Adopt(const ClaimRequest& req, int64_t lid) {
    const FireKey& fire = req.fire;
    const std::string ok = OpenKey(fire);
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {ok, LiveKey(fire), RunKey(fire, 1)}));
      if (!s.Has(ok)) return std::optional<gnomon::Claim>();
      FireRec f = DecodeFire(s.Value(ok));
      const int64_t token = TokenOf(s, fire, 1);
      if (f.node != req.node_id || f.att != 1 || f.lid != lid || token == 0 ||
          !s.Has(LiveKey(fire))) {
        return std::optional<gnomon::Claim>();
      }
      Result<bool> alive = KeepAlive(lid);
      if (!alive.ok()) return alive.status();
      if (!*alive) return std::optional<gnomon::Claim>();
      const Instant now = Now();
      f.lease = (now + req.lease_ttl).unix_millis();
      Writes w;
      w.Put(ok, Encode(f));
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      FireKey adopted = fire;
      adopted.shard_count = f.sc;
      return std::optional<gnomon::Claim>(
          gnomon::Claim{adopted, 1, token, req.node_id, now + req.lease_ttl});
    }
    return Contention("adopt " + fire.RunId());
  }

  // A renewal is a keepalive of the attempt's etcd lease plus the new deadline in its open key
  // (a renewal asking for more than the lease's TTL moves the live key to a new lease).
  Status Renew(gnomon::Claim& claim, Duration ttl) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "renew: ttl"));
    std::optional<Lease> bigger;
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, HoldKeys(claim)));
      const Instant now = Now();
      Result<FireRec> f = Fenced(s, claim, now);
      if (!f.ok()) return f.status();
      Result<bool> alive = KeepAlive(f->lid);
      if (!alive.ok()) return alive.status();
      if (!*alive) {
        return LeaseLostError(claim.fire.RunId() + " (token " +
                              std::to_string(claim.fencing_token) + "): its etcd lease ended");
      }
      Writes w;
      if (std::chrono::seconds(f->lttl) < ttl) {
        Result<Lease> l = LeaseFor(bigger, ttl);
        if (!l.ok()) return l.status();
        f->lid = l->id;
        f->lttl = l->ttl_s;
        w.Put(LiveKey(claim.fire), claim.node_id, l->id);
      }
      f->lease = (now + ttl).unix_millis();
      w.Put(OpenKey(claim.fire), Encode(*f));
      Result<Committed> c = Commit(s, w, json::array(), nullptr, TokenCompare(claim));
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      claim.lease_expires_at = now + ttl;
      return Status::Ok();
    }
    return Contention("renew " + claim.fire.RunId());
  }

  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "next attempt: ttl"));
    std::optional<Lease> lease;
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, HoldKeys(claim)));
      const Instant now = Now();
      Result<FireRec> f = Fenced(s, claim, now);
      if (!f.ok()) return f.status();
      Result<Lease> l = LeaseFor(lease, ttl);
      if (!l.ok()) return l.status();
      Writes w;
      FireKey fire = claim.fire;
      fire.shard_count = f->sc;
      FinishRunning(
          w, s, fire, f->att, RunOutcome::kFailed,
          "superseded by attempt " + std::to_string(claim.attempt + 1) + " without a report", now);
      gnomon::Claim next = StartAttempt(w, fire, f->att + 1, claim.node_id, ttl, now, *l);
      Result<Committed> c = Commit(s, w, CountOps(fire.job_id), nullptr, TokenCompare(claim));
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      next.fencing_token = c->revision;
      TrimAfter(fire.job_id, *c);
      return next;
    }
    return Contention("next attempt of " + claim.fire.RunId());
  }

  // Completion: a txn comparing the token (the record's create_revision), the open key and the
  // live key as read.
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateReport(claim, record, final));
    const std::string sk = StateKey(claim.fire.job_id);
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      std::vector<std::string> keys = HoldKeys(claim);
      if (final) keys.push_back(sk);
      GNOMON_RETURN_IF_ERROR(Read(s, keys));
      const Instant now = Now();
      Result<FireRec> f = Fenced(s, claim, now);
      if (!f.ok()) return f.status();
      Writes w;
      RunRecord stored = record;
      stored.output = coord::TruncateOutput(std::move(stored.output));
      PutRecord(w, stored);
      if (final) {
        CloseFire(w, claim.fire);
        StateRec st = DecodeState(s.Value(sk));
        switch (coord::FailureEffectOf(record.outcome)) {
          case coord::FailureEffect::kReset:
            st.fails = 0;
            break;
          case coord::FailureEffect::kIncrement:
            ++st.fails;
            break;
          case coord::FailureEffect::kUnchanged:
            break;
        }
        w.Put(sk, Encode(st));
      }
      Result<Committed> c = Commit(s, w, json::array(), nullptr, TokenCompare(claim));
      if (!c.ok()) return c.status();
      if (c->succeeded) return Status::Ok();
    }
    return Contention("report " + claim.fire.RunId());
  }

  // Open fires whose attempt no longer holds them: the etcd lease ended (the live key is gone)
  // or the deadline passed.
  Result<std::vector<ExpiredFire>> ListExpired(int limit) {
    Result<int> page = coord::PageLimit(limit);
    if (!page.ok()) return page.status();
    Snapshot s;
    const std::string open = p_ + "open/";
    GNOMON_RETURN_IF_ERROR(Read(s, {}, {open, p_ + "live/"}));
    const Instant now = Now();
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
      if (Holds(s, e.fire, f, now)) continue;
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
    for (const ExpiredFire& e : out) records.push_back(RunKey(e.fire, e.attempt));
    GNOMON_RETURN_IF_ERROR(Read(s, records));
    for (ExpiredFire& e : out) e.fencing_token = TokenOf(s, e.fire, e.attempt);
    return out;
  }

  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& expired,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateResolveLost(expired, node_id, policy, ttl));
    const std::string fk = FireMarkerKey(expired.fire);
    const std::string sk = StateKey(expired.fire.job_id);
    const std::string ok = OpenKey(expired.fire);
    std::optional<Lease> lease;
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      // The expired attempt's record too: if the fire moved to another attempt, the compare
      // below fails anyway.
      GNOMON_RETURN_IF_ERROR(
          Read(s, {fk, sk, ok, LiveKey(expired.fire), RunKey(expired.fire, expired.attempt)}));
      const Instant now = Now();
      if (!s.Has(fk)) return NotFoundError("fire " + expired.fire.RunId() + " has no record");
      auto changed = [&] {
        return FailedPreconditionError("fire " + expired.fire.RunId() + " (token " +
                                       std::to_string(expired.fencing_token) +
                                       ") was resolved, renewed or taken over meanwhile");
      };
      if (!s.Has(ok)) return changed();
      FireRec f = DecodeFire(s.Value(ok));
      FireKey fire = expired.fire;
      fire.shard_count = f.sc;
      if (f.att != expired.attempt || TokenOf(s, fire, f.att) != expired.fencing_token ||
          Holds(s, fire, f, now)) {
        return changed();
      }
      Writes w;
      FinishRunning(w, s, fire, f.att, RunOutcome::kLost,
                    "lease expired; holder " + f.node + " vanished", now);
      StateRec st = DecodeState(s.Value(sk));
      std::optional<gnomon::Claim> next;
      if (policy == LostPolicy::kFail) {
        CloseFire(w, fire);
        ++st.fails;
        w.Put(sk, Encode(st));
      } else {
        Result<Lease> l = LeaseFor(lease, ttl);
        if (!l.ok()) return l.status();
        next = StartAttempt(w, fire, f.att + 1, node_id, ttl, now, *l);
      }
      Result<Committed> c = Commit(s, w, CountOps(fire.job_id));
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      if (next) next->fencing_token = c->revision;
      TrimAfter(fire.job_id, *c);
      return next;
    }
    return Contention("resolve lost " + expired.fire.RunId());
  }

  Status RecordSkipped(const FireKey& fire, const std::string& node_id, const std::string& reason) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
    const std::string fk = FireMarkerKey(fire);
    const std::string sk = StateKey(fire.job_id);
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {fk, sk}));
      if (s.Has(fk)) return AlreadyExistsError("fire " + fire.RunId() + " already has a record");
      Writes w;
      SkipWrites(w, fire, node_id, reason, Now(), DecodeState(s.Value(sk)));
      Result<Committed> c = Commit(s, w, CountOps(fire.job_id));
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      TrimAfter(fire.job_id, *c);
      return Status::Ok();
    }
    return Contention("record skipped " + fire.RunId());
  }

  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) {
    std::vector<std::string> keys;
    for (const FireKey& f : fires) {
      GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(f));
      keys.push_back(FireMarkerKey(f));
    }
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, keys));
    std::vector<bool> out;
    for (const std::string& key : keys) out.push_back(s.Has(key));
    return out;
  }

  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, HoldKeys(claim)));
      Result<FireRec> f = Fenced(s, claim, Now());
      if (!f.ok()) return f.status();
      Writes w;
      w.Put(CheckpointKey(claim.fire), value);
      Result<Committed> c = Commit(s, w, json::array(), nullptr, TokenCompare(claim));
      if (!c.ok()) return c.status();
      if (c->succeeded) return Status::Ok();
    }
    return Contention("save checkpoint " + claim.fire.RunId());
  }

  // The running record of `claim`'s attempt with `output` (a Put keeps the key's create
  // revision, which is the attempt's token).
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, HoldKeys(claim)));
      Result<FireRec> f = Fenced(s, claim, Now());
      if (!f.ok()) return f.status();
      const Kv* kv = s.Find(RunKey(claim.fire, claim.attempt));
      if (!kv) return Status::Ok();
      Result<RunRecord> r = DecodeRecord(*kv);
      if (!r.ok() || r->outcome != RunOutcome::kRunning) return Status::Ok();
      r->output = coord::TruncateOutput(output);
      Writes w;
      PutRecord(w, *r);
      Result<Committed> c = Commit(s, w, json::array(), nullptr, TokenCompare(claim));
      if (!c.ok()) return c.status();
      if (c->succeeded) return Status::Ok();
    }
    return Contention("save live output " + claim.fire.RunId());
  }

  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) {
    Snapshot s;
    const std::string key = CheckpointKey(fire);
    GNOMON_RETURN_IF_ERROR(Read(s, {key}));
    if (!s.Has(key)) return std::optional<std::string>();
    return std::optional<std::string>(s.Value(key));
  }

  Result<JobState> GetJobState(const std::string& job_id) {
    if (!IsValidJobId(job_id)) return JobState{};
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, {StateKey(job_id)}));
    StateRec st = DecodeState(s.Value(StateKey(job_id)));
    JobState out;
    out.paused = st.paused;
    out.pause_reason = st.reason;
    out.consecutive_failures = st.fails;
    if (st.last) out.last_scheduled = Instant::FromUnixMillis(*st.last);
    return out;
  }

  Status CancelFire(const FireKey& key, const std::string& reason) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(key));
    const std::string fk = FireMarkerKey(key);
    const std::string ok = OpenKey(key);
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {fk, ok}));
      if (!s.Has(fk)) return coord::NoSuchFire(key);
      if (!s.Has(ok)) return coord::FireEnded(key);
      FireRec f = DecodeFire(s.Value(ok));
      FireKey fire = key;
      fire.shard_count = f.sc;
      GNOMON_RETURN_IF_ERROR(Read(s, {RunKey(fire, f.att)}));
      const Instant now = Now();
      Writes w;
      if (const Kv* kv = s.Find(RunKey(fire, f.att))) {
        Result<RunRecord> r = DecodeRecord(*kv);
        if (r.ok()) {
          coord::CancelRecord(*r, reason, now);
          PutRecord(w, *r);
        }
      }
      CloseFire(w, fire);
      w.Put(JobsVersionKey(), fire.job_id);
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
      if (c->succeeded) return Status::Ok();
    }
    return Contention("cancel " + key.RunId());
  }

  Result<gnomon::Claim> RerunFire(const FireKey& key, const std::string& node_id, Duration ttl,
                                  const std::string& cause) {
    GNOMON_RETURN_IF_ERROR(coord::ValidateRerun(key, node_id, ttl, cause));
    const std::string fk = FireMarkerKey(key);
    const std::string ok = OpenKey(key);
    std::optional<Lease> lease;
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {fk, ok}));
      if (!s.Has(fk)) return coord::NoSuchFire(key);
      if (s.Has(ok)) return coord::FireNotEnded(key);
      // The marker keeps the shard count (PutMarker).
      FireRec marker = DecodeFire(s.Value(fk));
      FireKey fire = key;
      fire.shard_count = marker.sc;
      // The fire's newest record names its last attempt (records sort newest attempt first).
      const std::string prefix = RunKey(fire, 1).substr(0, RunKey(fire, 1).rfind(' ') + 1);
      int last = 0;
      GNOMON_RETURN_IF_ERROR(Scan(prefix, PrefixEnd(prefix), 1, false, [&](const Kv& kv) {
        Result<RunRecord> r = DecodeRecord(kv);
        if (r.ok()) last = r->attempt;
        return false;
      }));
      if (last == 0) return coord::NoSuchFire(key);
      Result<Lease> l = LeaseFor(lease, ttl);
      if (!l.ok()) return l.status();
      Writes w;
      gnomon::Claim claim = StartAttempt(w, fire, last + 1, node_id, ttl, Now(), *l, cause);
      Result<Committed> c = Commit(s, w, CountOps(fire.job_id));
      if (!c.ok()) return c.status();
      if (!c->succeeded) continue;
      claim.fencing_token = c->revision;
      TrimAfter(fire.job_id, *c);
      return claim;
    }
    return Contention("rerun " + key.RunId());
  }

  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) {
    if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
    const std::string sk = StateKey(job_id);
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {sk}));
      StateRec st = DecodeState(s.Value(sk));
      st.paused = paused;
      st.reason = paused ? reason : "";
      Writes w;
      w.Put(sk, Encode(st));
      w.Put(JobsVersionKey(), job_id);
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
      if (c->succeeded) return Status::Ok();
    }
    return Contention("set paused " + job_id);
  }

  // --- History -------------------------------------------------------------------------------
  // Keys in [from, to), at most `limit` per request, page after page.
  Status Scan(const std::string& from, const std::string& to, int64_t batch, bool keys_only,
              const std::function<bool(const Kv&)>& visit) {
    std::string start = from;
    for (;;) {
      json extra{{"limit", std::to_string(batch)}};
      if (keys_only) extra["keys_only"] = true;
      json body = RangeOp(start, to, extra)["request_range"];
      Result<json> r = client_->Call("/v3/kv/range", body);
      if (!r.ok()) return r.status();
      if (!r->contains("kvs")) return Status::Ok();
      std::string last;
      for (const json& item : (*r)["kvs"]) {
        Result<Kv> kv = ParseKv(item);
        if (!kv.ok()) return kv.status();
        last = kv->key;
        if (!visit(*kv)) return Status::Ok();
      }
      if (!r->value("more", false)) return Status::Ok();
      start = last + std::string(1, '\0');
    }
  }

  Result<RunPage> ListRuns(const RunQuery& query) {
    Result<int> limit = coord::PageLimit(query.limit);
    if (!limit.ok()) return limit.status();
    Result<std::optional<coord::RunPosition>> after = coord::PageStart(query.cursor);
    if (!after.ok()) return after.status();
    const bool by_job = !query.job_id.empty();
    if (by_job && !IsValidJobId(query.job_id)) return RunPage{};
    const std::string base = by_job ? IndexPrefix(query.job_id) : RunsPrefix();
    std::string from = base;
    std::string to = PrefixEnd(base);
    if (query.scheduled_until) {
      from = std::max(from, base + Desc(query.scheduled_until->unix_millis() - 1));
    }
    if (query.scheduled_from) {
      to = std::min(to, base + Desc(query.scheduled_from->unix_millis() - 1));
    }
    if (*after) {
      // Strictly after the cursor's position (a cursor from an all-jobs listing also works
      // for one job: positions compare by instant, then job id).
      const coord::RunPosition& a = **after;
      std::string key;
      if (!by_job) {
        key = RunKey(a.job_id, a.scheduled_ms, a.shard, a.attempt) + std::string(1, '\0');
      } else if (a.job_id == query.job_id) {
        key = IndexKey(query.job_id, a.scheduled_ms, a.shard, a.attempt) + std::string(1, '\0');
      } else if (a.job_id < query.job_id) {
        key = base + Desc(a.scheduled_ms);  // this job's records at that instant come after
      } else {
        key = base + Desc(a.scheduled_ms) + "!";  // they came before: skip the instant
      }
      from = std::max(from, key);
    }
    RunPage page;
    if (from >= to) return page;
    const size_t want = static_cast<size_t>(*limit);
    std::vector<RunRecord> found;
    bool more = false;
    if (!by_job) {
      Status scan = Scan(from, to, std::min<int64_t>(want + 1, 256), false, [&](const Kv& kv) {
        Result<RunRecord> r = DecodeRecord(kv);
        if (!r.ok()) return true;
        if (query.outcome && r->outcome != *query.outcome) return true;
        if (found.size() == want) {
          more = true;
          return false;
        }
        found.push_back(std::move(*r));
        return true;
      });
      GNOMON_RETURN_IF_ERROR(scan);
    } else {
      std::vector<std::string> keys;
      const std::string outcome = query.outcome ? std::string(ToString(*query.outcome)) : "";
      Status scan = Scan(from, to, std::min<int64_t>(want + 1, 1000), false, [&](const Kv& kv) {
        if (!outcome.empty() && kv.value != outcome) return true;
        KeyPos pos;
        if (!ParseIndexTail(std::string_view(kv.key).substr(base.size()), pos)) return true;
        if (keys.size() == want) {
          more = true;
          return false;
        }
        keys.push_back(RunKey(query.job_id, pos.ms, pos.shard, pos.attempt));
        return true;
      });
      GNOMON_RETURN_IF_ERROR(scan);
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, keys));
      for (const std::string& key : keys) {
        if (!s.Has(key)) continue;  // pruned meanwhile
        Result<RunRecord> r = DecodeRecord(s.kvs.at(key));
        if (r.ok()) found.push_back(std::move(*r));
      }
    }
    page.runs = std::move(found);
    if (more && !page.runs.empty()) {
      page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
    }
    return page;
  }

  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) {
    auto not_found = [&] {
      return NotFoundError("run " + run_id.substr(0, 200) + " has no record");
    };
    const size_t at = run_id.rfind('@');
    if (at == std::string::npos) return not_found();
    const std::string job = run_id.substr(0, at);
    std::string_view rest = std::string_view(run_id).substr(at + 1);
    int64_t shard = 0;
    const size_t hash = rest.find('#');
    if (hash != std::string_view::npos) {
      if (!ParseI64(rest.substr(hash + 1), shard) || shard < 0 || shard > INT32_MAX) {
        return not_found();
      }
      rest = rest.substr(0, hash);
    }
    int64_t ms = 0;
    if (!IsValidJobId(job) || !ParseI64(rest, ms)) return not_found();
    const std::string prefix = RunsPrefix() + Desc(ms) + " " + job + " " + Pad(shard, 10) + " ";
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, {}, {prefix}));
    std::vector<RunRecord> out;
    for (const Kv& kv : s.prefixes[prefix]) {
      Result<RunRecord> r = DecodeRecord(kv);
      if (r.ok() && r->run_id == run_id) out.push_back(std::move(*r));
    }
    if (out.empty()) return not_found();
    std::sort(out.begin(), out.end(),
              [](const RunRecord& a, const RunRecord& b) { return a.attempt < b.attempt; });
    return out;
  }

  // Deletes the records named by `index` (per-job index key -> mod_revision) unless their index
  // entry changed since it was read. Best effort per batch.
  Status DeleteRecords(const std::string& job,
                       const std::vector<std::pair<std::string, int64_t>>& index) {
    const std::string base = IndexPrefix(job);
    for (size_t start = 0; start < index.size(); start += kDeleteBatch) {
      Snapshot s;
      Writes w;
      for (size_t i = start; i < std::min(index.size(), start + kDeleteBatch); ++i) {
        const auto& [key, rev] = index[i];
        KeyPos pos;
        if (!ParseIndexTail(std::string_view(key).substr(base.size()), pos)) continue;
        s.kvs[key] = Kv{key, "", rev};
        w.Delete(key);
        w.Delete(RunKey(job, pos.ms, pos.shard, pos.attempt));
      }
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
    }
    return Status::Ok();
  }

  Status TrimJob(const std::string& job, int64_t excess) {
    std::vector<std::pair<std::string, int64_t>> victims;
    json body = RangeOp(IndexPrefix(job), PrefixEnd(IndexPrefix(job)),
                        {{"sort_order", "DESCEND"},
                         {"sort_target", "KEY"},
                         {"limit", std::to_string(excess + 100)}})["request_range"];
    Result<json> r = client_->Call("/v3/kv/range", body);
    if (!r.ok()) return r.status();
    if (!r->contains("kvs")) return Status::Ok();
    for (const json& item : (*r)["kvs"]) {
      Result<Kv> kv = ParseKv(item);
      if (!kv.ok()) return kv.status();
      if (kv->value == ToString(RunOutcome::kRunning)) continue;
      victims.emplace_back(kv->key, kv->mod_revision);
      if (static_cast<int64_t>(victims.size()) >= excess) break;
    }
    return DeleteRecords(job, victims);
  }

  Status TrimTotal(int64_t excess) {
    json body = RangeOp(RunsPrefix(), PrefixEnd(RunsPrefix()),
                        {{"sort_order", "DESCEND"},
                         {"sort_target", "KEY"},
                         {"keys_only", true},
                         {"limit", std::to_string(excess + 100)}})["request_range"];
    Result<json> r = client_->Call("/v3/kv/range", body);
    if (!r.ok()) return r.status();
    if (!r->contains("kvs")) return Status::Ok();
    std::map<std::string, std::vector<std::string>> index_by_job;
    std::vector<std::string> index_keys;
    for (const json& item : (*r)["kvs"]) {
      Result<Kv> kv = ParseKv(item);
      if (!kv.ok()) return kv.status();
      KeyPos pos;
      if (!ParseRunTail(std::string_view(kv->key).substr(RunsPrefix().size()), pos)) continue;
      index_keys.push_back(IndexKey(pos.job, pos.ms, pos.shard, pos.attempt));
      index_by_job[pos.job].push_back(index_keys.back());
    }
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, index_keys));
    int64_t chosen = 0;
    std::set<std::string> victims;
    for (const std::string& key : index_keys) {
      if (chosen >= excess) break;
      if (!s.Has(key) || s.Value(key) == ToString(RunOutcome::kRunning)) continue;
      victims.insert(key);
      ++chosen;
    }
    for (const auto& [job, keys] : index_by_job) {
      std::vector<std::pair<std::string, int64_t>> list;
      for (const std::string& key : keys) {
        if (victims.contains(key)) list.emplace_back(key, s.kvs[key].mod_revision);
      }
      GNOMON_RETURN_IF_ERROR(DeleteRecords(job, list));
    }
    return Status::Ok();
  }

  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
    if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
    if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
    if (!IsValidJobId(job_id)) return InvalidArgumentError("prune: invalid job id");
    const int64_t cutoff = (Now() - max_age).unix_millis();
    const std::string base = IndexPrefix(job_id);
    std::vector<std::pair<std::string, int64_t>> victims;
    int fires_seen = 0;
    std::optional<std::pair<int64_t, int>> current;
    Status scan = Scan(base, PrefixEnd(base), 1000, false, [&](const Kv& kv) {
      KeyPos pos;
      if (!ParseIndexTail(std::string_view(kv.key).substr(base.size()), pos)) return true;
      const std::pair<int64_t, int> fire{pos.ms, pos.shard};
      if (current != fire) {
        current = fire;
        ++fires_seen;
      }
      const bool prune = fires_seen > keep_last || pos.ms < cutoff;
      if (prune && kv.value != ToString(RunOutcome::kRunning)) {
        victims.emplace_back(kv.key, kv.mod_revision);
      }
      return true;
    });
    GNOMON_RETURN_IF_ERROR(scan);
    GNOMON_RETURN_IF_ERROR(DeleteRecords(job_id, victims));
    // Fire markers are the claim keys that stop a second claim; they go only with max_age, and
    // never while an attempt holds the fire (its open key exists).
    const std::string fires = p_ + "fire/" + job_id + "/";
    const std::string open = OpenPrefix(job_id);
    Snapshot open_now;
    GNOMON_RETURN_IF_ERROR(Read(open_now, {}, {open}));
    std::vector<Kv> old;
    scan = Scan(fires, fires + Asc(cutoff), 1000, false, [&](const Kv& kv) {
      if (!open_now.Has(open + kv.key.substr(fires.size()))) old.push_back(kv);
      return true;
    });
    GNOMON_RETURN_IF_ERROR(scan);
    for (size_t start = 0; start < old.size(); start += kDeleteBatch) {
      Snapshot s;
      Writes w;
      for (size_t i = start; i < std::min(old.size(), start + kDeleteBatch); ++i) {
        s.kvs[old[i].key] = old[i];
        w.Delete(old[i].key);
        w.Delete(p_ + "cp/" + old[i].key.substr(p_.size() + 5));
      }
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
    }
    return Status::Ok();
  }

  // --- Nodes ---------------------------------------------------------------------------------
  Status Heartbeat(const NodeInfo& node, Duration ttl) {
    if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
    GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
    const Instant now = Now();
    json j{{"host", node.host},
           {"version", node.version},
           {"started", node.started_at.unix_millis()},
           {"hb", now.unix_millis()},
           {"exp", (now + ttl).unix_millis()},
           {"running", node.running},
           {"skew_ms", node.clock_skew.count()}};
    json body{{"key", coord::Base64Encode(NodeKey(node.node_id))},
              {"value", coord::Base64Encode(j.dump())}};
    Result<json> r = client_->Call("/v3/kv/put", body);
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<std::vector<NodeInfo>> ListNodes() {
    Snapshot s;
    const std::string prefix = p_ + "nodes/";
    GNOMON_RETURN_IF_ERROR(Read(s, {}, {prefix}));
    const int64_t now = Now().unix_millis();
    std::vector<NodeInfo> out;
    Snapshot stale;
    Writes gone;
    for (const Kv& kv : s.prefixes[prefix]) {
      json j = json::parse(kv.value, nullptr, false);
      if (!j.is_object()) continue;
      if (j.value("exp", int64_t{0}) <= now) {
        if (stale.kvs.size() < kDeleteBatch) {
          stale.kvs[kv.key] = kv;
          gone.Delete(kv.key);
        }
        continue;
      }
      NodeInfo n;
      n.node_id = kv.key.substr(prefix.size());
      n.host = j.value("host", "");
      n.version = j.value("version", "");
      n.started_at = Instant::FromUnixMillis(j.value("started", int64_t{0}));
      n.last_heartbeat = Instant::FromUnixMillis(j.value("hb", int64_t{0}));
      n.running = j.value("running", 0);
      n.clock_skew = Duration(j.value("skew_ms", int64_t{0}));
      out.push_back(std::move(n));
    }
    // Expired heartbeats are garbage: drop them unless renewed meanwhile (best effort).
    if (!stale.kvs.empty()) (void)Commit(stale, gone);
    return out;
  }

  // --- Job definitions -----------------------------------------------------------------------
  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version) {
    if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
    if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
    const std::string key = JobKey(job_id);
    json compares = json::array({json{{"key", coord::Base64Encode(key)},
                                      {"target", "MOD"},
                                      {"result", "EQUAL"},
                                      {"mod_revision", std::to_string(expected_version)}}});
    Writes w;
    w.Put(key, definition);
    w.Put(JobsVersionKey(), job_id);
    Result<json> r = Txn(compares, w.Ops(), json::array({RangeOp(key)}));
    if (!r.ok()) return r.status();
    if (r->value("succeeded", false)) return I64((*r)["header"], "revision");
    const json& rr = (*r)["responses"].at(0).at("response_range");
    const int64_t current =
        rr.contains("kvs") && !rr["kvs"].empty() ? I64(rr["kvs"][0], "mod_revision") : 0;
    if (current == 0) {
      return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                     std::to_string(expected_version) + ")");
    }
    if (expected_version == 0) return AlreadyExistsError("job " + job_id + " already exists");
    return FailedPreconditionError("job " + job_id + " is at version " + std::to_string(current) +
                                   ", not " + std::to_string(expected_version));
  }

  Status DeleteJob(const std::string& job_id, int64_t expected_version) {
    if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
    if (!IsValidJobId(job_id)) return NotFoundError("job " + job_id + " does not exist");
    const std::string key = JobKey(job_id);
    json cmp{{"key", coord::Base64Encode(key)}, {"target", "MOD"}};
    if (expected_version == -1) {
      cmp["result"] = "GREATER";
      cmp["mod_revision"] = "0";
    } else {
      cmp["result"] = "EQUAL";
      cmp["mod_revision"] = std::to_string(expected_version);
    }
    Writes w;
    w.Delete(key);
    w.Put(JobsVersionKey(), job_id);
    Result<json> r = Txn(json::array({cmp}), w.Ops(), json::array({RangeOp(key)}));
    if (!r.ok()) return r.status();
    if (r->value("succeeded", false)) return Status::Ok();
    const json& rr = (*r)["responses"].at(0).at("response_range");
    if (!rr.contains("kvs") || rr["kvs"].empty()) {
      return NotFoundError("job " + job_id + " does not exist");
    }
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   std::to_string(I64(rr["kvs"][0], "mod_revision")) + ", not " +
                                   std::to_string(expected_version));
  }

  Result<StoredJob> GetJob(const std::string& job_id) {
    if (!IsValidJobId(job_id)) return coord::JobNotFound(job_id);
    const std::string key = JobKey(job_id);
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, {key}));
    if (!s.Has(key)) return coord::JobNotFound(job_id);
    return StoredJob{job_id, s.Value(key), s.kvs[key].mod_revision};
  }

  Result<std::vector<StoredJob>> ListJobs() {
    Snapshot s;
    const std::string prefix = p_ + "jobs/";
    GNOMON_RETURN_IF_ERROR(Read(s, {}, {prefix}));
    std::vector<StoredJob> out;
    for (const Kv& kv : s.prefixes[prefix]) {
      out.push_back(StoredJob{kv.key.substr(prefix.size()), kv.value, kv.mod_revision});
    }
    return out;
  }

  // JobsVersion and the revision it was read at.
  Result<std::pair<int64_t, int64_t>> VersionAt() {
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, {JobsVersionKey()}));
    return std::pair<int64_t, int64_t>(s.kvs[JobsVersionKey()].mod_revision, s.revision);
  }

  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout, Coordinator& self) {
    Result<std::pair<int64_t, int64_t>> v = VersionAt();
    if (!v.ok()) return v.status();
    if (v->first != since) return v->first;
    if (timeout <= Duration(0)) return v->first;
    json create{{"key", coord::Base64Encode(JobsVersionKey())},
                {"start_revision", std::to_string(v->second + 1)}};
    Status watched = client_->Watch(create, timeout, [](const json& result) {
      if (result.value("canceled", false)) return false;  // compacted or refused: re-read
      return !(result.contains("events") && !result["events"].empty());
    });
    if (!watched.ok()) return self.Coordinator::WaitJobsChange(since, timeout);
    Result<std::pair<int64_t, int64_t>> now = VersionAt();
    if (!now.ok()) return now.status();
    return now->first;
  }

  // --- Audit ---------------------------------------------------------------------------------
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) {
    if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
    const bool failed = record.result != AuditResult::kOk;
    const std::string prefix = AuditPrefix(failed);
    const std::string sk = AuditSeqKey();
    for (int round = 0; round < kMaxRounds; ++round) {
      Snapshot s;
      GNOMON_RETURN_IF_ERROR(Read(s, {sk}));
      int64_t last = 0;
      if (s.Has(sk) && !ParseI64(s.Value(sk), last)) last = 0;
      const int64_t seq = last + 1;
      json j{{"seq", seq},
             {"at", Now().unix_millis()},
             {"who", record.who},
             {"action", record.action},
             {"target", record.target},
             {"status", coord::AuditStoredCode(record.result)},
             {"before", record.before},
             {"after", record.after}};
      Writes w;
      w.Put(sk, std::to_string(seq));
      w.Put(AuditKey(failed, seq), j.dump(-1, ' ', false, json::error_handler_t::replace));
      // The oldest records of the class beyond the newest keep - 1 (this one is the keep-th).
      Result<std::string> cut = AuditCut(prefix, keep - 1);
      if (!cut.ok()) return cut.status();
      if (!cut->empty()) w.DeleteRange(prefix, *cut);
      Result<Committed> c = Commit(s, w);
      if (!c.ok()) return c.status();
      if (c->succeeded) return seq;
    }
    return Contention("append audit");
  }

  // The key before which the records under `prefix` are older than its newest `keep`; "" when
  // there are at most `keep`.
  Result<std::string> AuditCut(const std::string& prefix, int keep) {
    Result<json> count =
        client_->Call("/v3/kv/range",
                      RangeOp(prefix, PrefixEnd(prefix), {{"count_only", true}})["request_range"]);
    if (!count.ok()) return count.status();
    const int64_t excess = I64(*count, "count") - keep;
    if (excess <= 0) return std::string();
    json body = RangeOp(prefix, PrefixEnd(prefix),
                        {{"sort_order", "ASCEND"},
                         {"sort_target", "KEY"},
                         {"keys_only", true},
                         {"limit", std::to_string(excess)}})["request_range"];
    Result<json> r = client_->Call("/v3/kv/range", body);
    if (!r.ok()) return r.status();
    std::string last;
    if (r->contains("kvs")) {
      for (const json& item : (*r)["kvs"]) {
        Result<Kv> kv = ParseKv(item);
        if (!kv.ok()) return kv.status();
        last = kv->key;
      }
    }
    return last.empty() ? last : last + std::string(1, '\0');
  }

  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) {
    Result<int> page = coord::PageLimit(limit);
    if (!page.ok()) return page.status();
    if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
    std::vector<AuditRecord> out;
    // Both classes, newest first; merged by seq below.
    for (bool failed : {false, true}) {
      const std::string prefix = AuditPrefix(failed);
      const std::string end = before_seq == 0 ? PrefixEnd(prefix) : AuditKey(failed, before_seq);
      json body = RangeOp(prefix, end,
                          {{"sort_order", "DESCEND"},
                           {"sort_target", "KEY"},
                           {"limit", std::to_string(*page)}})["request_range"];
      Result<json> r = client_->Call("/v3/kv/range", body);
      if (!r.ok()) return r.status();
      if (!r->contains("kvs")) continue;
      for (const json& item : (*r)["kvs"]) {
        Result<Kv> kv = ParseKv(item);
        if (!kv.ok()) return kv.status();
        json j = json::parse(kv->value, nullptr, false);
        if (!j.is_object()) continue;
        AuditRecord a;
        a.seq = j.value("seq", int64_t{0});
        a.at = Instant::FromUnixMillis(j.value("at", int64_t{0}));
        a.who = j.value("who", "");
        a.action = j.value("action", "");
        a.target = j.value("target", "");
        a.result = coord::AuditResultOfStoredCode(j.value("status", int64_t{0}));
        a.before = j.value("before", "");
        a.after = j.value("after", "");
        out.push_back(std::move(a));
      }
    }
    std::sort(out.begin(), out.end(),
              [](const AuditRecord& a, const AuditRecord& b) { return a.seq > b.seq; });
    if (out.size() > static_cast<size_t>(*page)) out.resize(static_cast<size_t>(*page));
    return out;
  }

 private:
  const EtcdOptions options_;
  const std::string p_;
  std::unique_ptr<coord::EtcdClient> client_;
  std::mutex uncertain_mu_;
  std::map<std::string, int64_t> uncertain_;  // guarded by uncertain_mu_
  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;
  bool clock_reset_ = false;  // guarded by keeper_mu_
  std::jthread keeper_;       // last: stopped and joined before the members it uses go
};

// ---------------------------------------------------------------------------------------------

Result<EtcdOptions> ParseEtcdUrl(std::string_view url, EtcdOptions base) {
  auto bad = [&](const std::string& why) {
    // Never echo the credentials: show the URL without its user-info part.
    std::string shown(url.substr(0, 300));
    const size_t scheme = shown.find("://");
    const size_t at = shown.rfind('@');
    if (at != std::string::npos && scheme != std::string::npos && at > scheme) {
      shown = shown.substr(0, scheme + 3) + "***@" + shown.substr(at + 1);
    }
    return InvalidArgumentError("etcd URL \"" + shown + "\": " + why);
  };
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme)) return bad("does not start with etcd://");
  std::string_view rest = url.substr(kScheme.size());
  auto decode = [](std::string_view in, std::string& out) {
    Result<std::string> decoded = PercentDecode(in);
    if (decoded.ok()) out = std::move(*decoded);
    return decoded.ok();
  };
  // The user-info ends at the last '@'; the query (TLS parameters) starts at the first '?' after.
  const size_t at = rest.rfind('@');
  const size_t question = rest.find('?', at == std::string_view::npos ? 0 : at + 1);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : rest.substr(question + 1);
  rest = rest.substr(0, question);
  if (at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (!decode(userinfo.substr(0, colon), base.user)) return bad("bad user encoding");
    if (base.user.empty()) return bad("empty user name");
    base.password.clear();
    if (colon != std::string_view::npos && !decode(userinfo.substr(colon + 1), base.password)) {
      return bad("bad password encoding");
    }
  }
  // Endpoints written with their scheme, as etcd's own tools take them: https:// for TLS (all of
  // them), http:// or none for plain TCP.
  const bool https = rest.starts_with("https://");
  std::string endpoints;
  for (std::string_view item = rest;;) {
    const size_t comma = item.find(',');
    std::string_view one = item.substr(0, comma);
    if (one.empty()) return bad("missing host (an empty endpoint)");
    const bool one_https = one.starts_with("https://");
    if (one_https != https) return bad("either every endpoint is https:// or none");
    if (one_https) one.remove_prefix(8);
    if (one.starts_with("http://")) one.remove_prefix(7);
    if (!endpoints.empty()) endpoints += ',';
    endpoints += one;
    if (comma == std::string_view::npos) break;
    item.remove_prefix(comma + 1);
  }
  base.tls = TlsOptions{};
  base.tls.enabled = https;
  if (!query.empty() || question != std::string_view::npos) {
    Result<TlsOptions> tls =
        ParseTlsQuery(query, https, "write the endpoints as https://host:port");
    if (!tls.ok()) return bad(tls.status().message());
    base.tls = *tls;
  }
  rest = endpoints;
  const size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    if (path.empty()) return bad("empty prefix after '/'");
    base.prefix = std::string(path);
    if (base.prefix.back() != '/') base.prefix += '/';
  }
  base.endpoints.clear();
  while (true) {
    const size_t comma = hosts.find(',');
    std::string_view hp = hosts.substr(0, comma);
    const size_t colon = hp.rfind(':');
    std::string_view host = hp.substr(0, colon);
    if (host.empty()) return bad("missing host (an endpoint has none)");
    if (std::any_of(host.begin(), host.end(), [](char c) { return c <= ' ' || c > '~'; })) {
      return bad("an endpoint's host has a space or non-printable character");
    }
    int64_t port = 2379;
    if (colon != std::string_view::npos &&
        (!ParseI64(hp.substr(colon + 1), port) || port < 1 || port > 65535)) {
      return bad("port is not 1-65535");
    }
    base.endpoints.emplace_back(std::string(host), static_cast<int>(port));
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  Status valid = ValidateOptions(base);
  if (!valid.ok()) return bad(valid.message());
  return base;
}

Result<std::unique_ptr<EtcdCoordinator>> EtcdCoordinator::Open(const EtcdOptions& options) {
  EtcdOptions o = options;
  GNOMON_RETURN_IF_ERROR(ValidateOptions(o));
  coord::EtcdClientOptions co;
  co.endpoints = o.endpoints;
  co.user = o.user;
  co.password = o.password;
  co.tls = o.tls;
  co.connect_timeout = o.connect_timeout;
  co.io_timeout = o.io_timeout;
  co.backoff_min = o.reconnect_backoff_min;
  co.backoff_max = o.reconnect_backoff_max;
  co.max_idle_connections = o.max_idle_connections;
  auto impl = std::make_unique<Impl>(o, std::move(co));
  try {
    Result<int64_t> probe = [&]() -> Result<int64_t> {
      Result<std::pair<int64_t, int64_t>> v = impl->VersionAt();
      if (!v.ok()) return v.status();
      return v->first;
    }();
    if (!probe.ok()) return probe.status();
    if (!o.clock) {
      // Narrow the server clock estimate before the first claim depends on it; a failure here
      // leaves a wider estimate that the keeper narrows later.
      (void)impl->CalibrateClock(kOpenCalibrationBudget);
      impl->StartClockKeeper();
    }
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: ") + e.what());
  }
  return std::unique_ptr<EtcdCoordinator>(new EtcdCoordinator(std::move(impl)));
}

EtcdCoordinator::EtcdCoordinator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdCoordinator::~EtcdCoordinator() = default;

// Every call runs inside Guarded: a JSON exception (an unexpected response shape) becomes an
// Internal status here and never leaves the module.
namespace {
template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: ") + e.what());
  }
}
}  // namespace

Result<Instant> EtcdCoordinator::Now() { return impl_->Now(); }
std::optional<Duration> EtcdCoordinator::ClockUncertainty() const {
  return impl_->ClockUncertainty();
}
Result<ClaimOutcome> EtcdCoordinator::Claim(const ClaimRequest& req) {
  return Guarded([&] { return impl_->Claim(req); });
}
Status EtcdCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->Renew(claim, ttl); });
}
Result<gnomon::Claim> EtcdCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->NextAttempt(claim, ttl); });
}
Status EtcdCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Guarded([&] { return impl_->Report(claim, record, final); });
}
Result<std::vector<ExpiredFire>> EtcdCoordinator::ListExpired(int limit) {
  return Guarded([&] { return impl_->ListExpired(limit); });
}
Result<std::optional<gnomon::Claim>> EtcdCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                  const std::string& node_id,
                                                                  LostPolicy policy, Duration ttl) {
  return Guarded([&] { return impl_->ResolveLost(fire, node_id, policy, ttl); });
}
Status EtcdCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                      const std::string& reason) {
  return Guarded([&] { return impl_->RecordSkipped(fire, node_id, reason); });
}
Result<std::vector<bool>> EtcdCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return Guarded([&] { return impl_->FiresRecorded(fires); });
}
Status EtcdCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Guarded([&] { return impl_->SaveCheckpoint(claim, value); });
}
Status EtcdCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Guarded([&] { return impl_->SaveLiveOutput(claim, output); });
}
Result<std::optional<std::string>> EtcdCoordinator::LoadCheckpoint(const FireKey& fire) {
  return Guarded([&] { return impl_->LoadCheckpoint(fire); });
}
Result<JobState> EtcdCoordinator::GetJobState(const std::string& job_id) {
  return Guarded([&] { return impl_->GetJobState(job_id); });
}
Status EtcdCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return Guarded([&] { return impl_->CancelFire(fire, reason); });
}
Result<gnomon::Claim> EtcdCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                 Duration ttl, const std::string& cause) {
  return Guarded([&] { return impl_->RerunFire(fire, node_id, ttl, cause); });
}
Status EtcdCoordinator::SetPaused(const std::string& job_id, bool paused,
                                  const std::string& reason) {
  return Guarded([&] { return impl_->SetPaused(job_id, paused, reason); });
}
Result<RunPage> EtcdCoordinator::ListRuns(const RunQuery& query) {
  return Guarded([&] { return impl_->ListRuns(query); });
}
Result<std::vector<RunRecord>> EtcdCoordinator::GetRun(const std::string& run_id) {
  return Guarded([&] { return impl_->GetRun(run_id); });
}
Status EtcdCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return Guarded([&] { return impl_->PruneHistory(job_id, keep_last, max_age); });
}
Status EtcdCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  return Guarded([&] { return impl_->Heartbeat(node, ttl); });
}
Result<std::vector<NodeInfo>> EtcdCoordinator::ListNodes() {
  return Guarded([&] { return impl_->ListNodes(); });
}
Result<int64_t> EtcdCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                        int64_t expected_version) {
  return Guarded([&] { return impl_->PutJob(job_id, definition, expected_version); });
}
Status EtcdCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return Guarded([&] { return impl_->DeleteJob(job_id, expected_version); });
}
Result<StoredJob> EtcdCoordinator::GetJob(const std::string& job_id) {
  return Guarded([&] { return impl_->GetJob(job_id); });
}
Result<std::vector<StoredJob>> EtcdCoordinator::ListJobs() {
  return Guarded([&] { return impl_->ListJobs(); });
}
Result<int64_t> EtcdCoordinator::JobsVersion() {
  return Guarded([&] {
    return [&]() -> Result<int64_t> {
      Result<std::pair<int64_t, int64_t>> v = impl_->VersionAt();
      if (!v.ok()) return v.status();
      return v->first;
    }();
  });
}
Result<int64_t> EtcdCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  return Guarded([&] { return impl_->WaitJobsChange(since, timeout, *this); });
}
Result<int64_t> EtcdCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  return Guarded([&] { return impl_->AppendAudit(record, keep); });
}
Result<std::vector<AuditRecord>> EtcdCoordinator::ListAudit(int limit, int64_t before_seq) {
  return Guarded([&] { return impl_->ListAudit(limit, before_seq); });
}

}  // namespace gnomon

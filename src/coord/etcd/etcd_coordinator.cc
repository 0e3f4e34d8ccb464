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
#include "src/coord/etcd/etcd_fires.h"
#include "src/coord/etcd/etcd_history.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"

namespace gnomon {
namespace {

using coord::etcd::DecodeState;
using coord::etcd::Encode;
using coord::etcd::EtcdKeyspace;
using coord::etcd::I64;
using coord::etcd::json;
using coord::etcd::kDeleteBatch;
using coord::etcd::kMaxRounds;
using coord::etcd::Kv;
using coord::etcd::Pad;
using coord::etcd::ParseI64;
using coord::etcd::ParseKv;
using coord::etcd::PrefixEnd;
using coord::etcd::RangeOp;
using coord::etcd::Snapshot;
using coord::etcd::StateRec;
using coord::etcd::Writes;

// Time Open() may spend calibrating the server clock estimate (two sweeps take 1-2 s).
constexpr Duration kOpenCalibrationBudget = std::chrono::milliseconds(2200);
// Time one later recalibration may take, and the pause after one that failed or fell short.
constexpr Duration kCalibrationBudget = std::chrono::seconds(3);
constexpr Duration kCalibrationPause = std::chrono::seconds(1);

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

// The clock and the operations on job state, nodes, definitions and the audit log (key names
// from the EtcdKeyspace base); fires: EtcdFires (etcd_fires.h); history: EtcdHistory
// (etcd_history.h).
class EtcdCoordinator::Impl : private EtcdKeyspace {
 public:
  Impl(const EtcdOptions& options, coord::EtcdClientOptions client_options)
      : EtcdKeyspace(options.prefix),
        options_(options),
        p_(options.prefix),
        client_(std::make_unique<coord::EtcdClient>(WithClockReset(std::move(client_options)))) {}

  // `o` telling the clock keeper when the server clock estimate restarts.
  coord::EtcdClientOptions WithClockReset(coord::EtcdClientOptions o) {
    o.on_clock_reset = [this] {
      std::lock_guard<std::mutex> lock(keeper_mu_);
      clock_reset_ = true;
      keeper_cv_.notify_all();
    };
    return o;
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

  // --- Transport (EtcdKv) ------------------------------------------------------------------
  Status Read(Snapshot& s, const std::vector<std::string>& keys,
              const std::vector<std::string>& prefixes = {}) {
    return kv_.Read(s, keys, prefixes);
  }
  using Committed = coord::etcd::EtcdKv::Committed;
  Result<Committed> Commit(const Snapshot& s, const Writes& w) { return kv_.Commit(s, w); }
  Result<json> Txn(const json& compares, const json& success, const json& failure) {
    return kv_.Txn(compares, success, failure);
  }
  Status Contention(const std::string& what) { return kv_.Contention(what); }

  coord::etcd::EtcdFires& fires() { return fires_; }
  coord::etcd::EtcdHistory& history() { return history_; }

  // --- Job state -----------------------------------------------------------------------------
  Result<JobState> GetJobState(const std::string& job_id) {
    if (!IsValidJobId(job_id)) return JobState{};
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(Read(s, {StateKey(job_id)}));
    return coord::etcd::ToJobState(DecodeState(s.Value(StateKey(job_id))));
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
  coord::etcd::EtcdKv kv_{*client_};
  coord::etcd::EtcdHistory history_{kv_, *this, options_.max_records_per_job,
                                    options_.max_records_total};
  coord::etcd::EtcdFires fires_{kv_, *this, history_, [this] { return Now(); }};
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
  return Guarded([&] { return impl_->fires().Claim(req); });
}
Status EtcdCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->fires().Renew(claim, ttl); });
}
Result<gnomon::Claim> EtcdCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  return Guarded([&] { return impl_->fires().NextAttempt(claim, ttl); });
}
Status EtcdCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  return Guarded([&] { return impl_->fires().Report(claim, record, final); });
}
Result<std::vector<ExpiredFire>> EtcdCoordinator::ListExpired(int limit) {
  return Guarded([&] { return impl_->fires().ListExpired(limit); });
}
Result<std::optional<gnomon::Claim>> EtcdCoordinator::ResolveLost(const ExpiredFire& fire,
                                                                  const std::string& node_id,
                                                                  LostPolicy policy, Duration ttl) {
  return Guarded([&] { return impl_->fires().ResolveLost(fire, node_id, policy, ttl); });
}
Status EtcdCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                      const std::string& reason) {
  return Guarded([&] { return impl_->fires().RecordSkipped(fire, node_id, reason); });
}
Result<std::vector<bool>> EtcdCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  return Guarded([&] { return impl_->fires().FiresRecorded(fires); });
}
Status EtcdCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return Guarded([&] { return impl_->fires().SaveCheckpoint(claim, value); });
}
Status EtcdCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return Guarded([&] { return impl_->fires().SaveLiveOutput(claim, output); });
}
Result<std::optional<std::string>> EtcdCoordinator::LoadCheckpoint(const FireKey& fire) {
  return Guarded([&] { return impl_->fires().LoadCheckpoint(fire); });
}
Result<JobState> EtcdCoordinator::GetJobState(const std::string& job_id) {
  return Guarded([&] { return impl_->GetJobState(job_id); });
}
Status EtcdCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  return Guarded([&] { return impl_->fires().CancelFire(fire, reason); });
}
Result<gnomon::Claim> EtcdCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                 Duration ttl, const std::string& cause) {
  return Guarded([&] { return impl_->fires().RerunFire(fire, node_id, ttl, cause); });
}
Status EtcdCoordinator::SetPaused(const std::string& job_id, bool paused,
                                  const std::string& reason) {
  return Guarded([&] { return impl_->SetPaused(job_id, paused, reason); });
}
Result<RunPage> EtcdCoordinator::ListRuns(const RunQuery& query) {
  return Guarded([&] { return impl_->history().ListRuns(query); });
}
Result<std::vector<RunRecord>> EtcdCoordinator::GetRun(const std::string& run_id) {
  return Guarded([&] { return impl_->history().GetRun(run_id); });
}
Status EtcdCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return Guarded(
      [&] { return impl_->history().PruneHistory(job_id, keep_last, max_age, impl_->Now()); });
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
Result<StoredJob> EtcdCoordinator::GetJob(const std::string& job_id) {
  return Guarded([&] { return impl_->GetJob(job_id); });
}
Status EtcdCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  return Guarded([&] { return impl_->DeleteJob(job_id, expected_version); });
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

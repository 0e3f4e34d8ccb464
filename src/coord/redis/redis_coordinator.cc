#include "gnomon/redis_coordinator.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_batcher.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_connection.h"
#include "src/coord/redis/redis_scripts.h"

namespace gnomon {
namespace {

namespace scripts = coord::redis_scripts;
using coord::RedisReply;
using coord::redis::IntAt;
using coord::redis::IsArray;
using coord::redis::IsValidKeyPart;
using coord::redis::Malformed;
using coord::redis::Ms;
using coord::redis::ParseInt;
using coord::redis::Word;

// A definition as stored in B:jobs: "<version>\n<definition>". Malformed("job") otherwise.
Result<StoredJob> StoredJobOf(const std::string& job_id, std::string_view stored) {
  const size_t nl = stored.find('\n');
  int64_t version = 0;
  if (nl == std::string_view::npos || !ParseInt(stored.substr(0, nl), version)) {
    return Malformed("job");
  }
  return StoredJob{job_id, std::string(stored.substr(nl + 1)), version};
}

void AppendField(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}
bool ReadField(std::string_view& in, std::string& out) {
  size_t colon = in.find(':');
  int64_t len = 0;
  if (colon == std::string_view::npos || !ParseInt(in.substr(0, colon), len) || len < 0 ||
      static_cast<size_t>(len) > in.size() - colon - 1) {
    return false;
  }
  out = std::string(in.substr(colon + 1, len));
  in.remove_prefix(colon + 1 + len);
  return true;
}
std::string EncodeNode(const NodeInfo& n) {
  std::string out;
  AppendField(out, n.host);
  AppendField(out, n.version);
  AppendField(out, Ms(n.started_at));
  AppendField(out, std::to_string(n.running));
  AppendField(out, Ms(n.clock_skew));
  return out;
}
bool DecodeNode(const std::string& node_id, std::string_view stored, NodeInfo& n) {
  size_t nl = stored.find('\n');
  int64_t hb = 0, started = 0, running = 0, skew = 0;
  if (nl == std::string_view::npos || !ParseInt(stored.substr(0, nl), hb)) return false;
  std::string_view in = stored.substr(nl + 1);
  std::string s_started, s_running, s_skew;
  n.node_id = node_id;
  if (!ReadField(in, n.host) || !ReadField(in, n.version) || !ReadField(in, s_started) ||
      !ReadField(in, s_running) || !ReadField(in, s_skew) || !ParseInt(s_started, started) ||
      !ParseInt(s_running, running) || !ParseInt(s_skew, skew)) {
    return false;
  }
  n.started_at = Instant::FromUnixMillis(started);
  n.last_heartbeat = Instant::FromUnixMillis(hb);
  n.running = static_cast<int>(running);
  n.clock_skew = Duration(skew);
  return true;
}

}  // namespace

// --- Open --------------------------------------------------------------------------------------

Result<coord::RedisConnectionConfig> RedisCoordinator::ConnectionConfigOf(
    const RedisOptions& options) {
  if (!options.sentinels.empty() && options.sentinel_master.empty()) {
    return InvalidArgumentError("redis: sentinels need a master name");
  }
  coord::RedisConnectionConfig config;
  if (options.tls.enabled) {
    Result<std::shared_ptr<const coord::RedisTlsContext>> tls =
        coord::RedisTlsContext::Create(options.tls);
    if (!tls.ok()) return tls.status();
    config.tls = std::move(*tls);
  } else if (options.tls != TlsOptions{}) {
    return InvalidArgumentError("redis: TLS options are set but tls.enabled is false");
  }
  config.host = options.host;
  config.port = options.port;
  config.user = options.user;
  config.password = options.password;
  config.db = options.db;
  config.connect_timeout = options.connect_timeout;
  config.io_timeout = options.io_timeout;
  config.backoff_min = options.reconnect_backoff_min;
  config.backoff_max = options.reconnect_backoff_max;
  config.sentinels = options.sentinels;
  config.sentinel_master = options.sentinel_master;
  return config;
}

Result<std::unique_ptr<RedisCoordinator>> RedisCoordinator::Open(const RedisOptions& options) {
  if (options.host.empty()) return InvalidArgumentError("redis: host is empty");
  if (options.port < 1 || options.port > 65535) {
    return InvalidArgumentError("redis: port " + std::to_string(options.port) + " is not 1-65535");
  }
  if (options.db < 0) return InvalidArgumentError("redis: db is negative");
  if (!IsValidKeyPart(options.prefix) || !IsValidKeyPart(options.ns)) {
    return InvalidArgumentError("redis: prefix and ns must match [A-Za-z0-9_.-]{1,64}");
  }
  if (options.connect_timeout <= Duration(0) || options.io_timeout <= Duration(0)) {
    return InvalidArgumentError("redis: connect_timeout and io_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= Duration(0) ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return InvalidArgumentError("redis: reconnect backoff must be positive and min <= max");
  }
  if (options.fire_retention < std::chrono::hours(1)) {
    return InvalidArgumentError("redis: fire_retention must be at least 1h");
  }
  if (options.max_records_per_job < 1 || options.max_records_total < 1) {
    return InvalidArgumentError("redis: record caps must be at least 1");
  }
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgumentError("redis: connections must be 1-64, not " +
                                std::to_string(options.connections));
  }
  Result<coord::RedisConnectionConfig> config = ConnectionConfigOf(options);
  if (!config.ok()) return config.status();
  Result<std::unique_ptr<coord::RedisConnectionPool>> conn =
      coord::RedisConnectionPool::Connect(*config, options.connections);
  if (!conn.ok()) return conn.status();

  // Persistence: acknowledged claims must survive a server restart (docs/reliability.md F3/F4).
  bool durable = false;
  std::string why;
  Result<RedisReply> aof = (*conn)->Command({"CONFIG", "GET", "appendonly"});
  if (!aof.ok()) return aof.status();
  if (aof->is_error()) {
    why = "cannot read its persistence settings (CONFIG GET appendonly: " + aof->str + ")";
  } else if (IsArray(*aof, 2) && aof->elements[1].str == "yes") {
    durable = true;
  } else {
    why = "it runs without `appendonly yes`, so a restart loses acknowledged claims";
  }
  if (!durable && !options.allow_unsafe) {
    return FailedPreconditionError("redis " + (*conn)->address() + ": " + why +
                                   "; enable AOF or set allow_unsafe to run anyway");
  }
  for (int id = 0; id < scripts::kCount; ++id) {
    GNOMON_CHECK((*conn)->AddScript(scripts::Source(static_cast<scripts::Id>(id))) == id);
  }
  GNOMON_RETURN_IF_ERROR((*conn)->LoadScripts());
  std::unique_ptr<RedisCoordinator> coord(new RedisCoordinator(options, *config, std::move(*conn)));
  coord->unsafe_persistence_ = !durable;
  (void)coord->Now();  // measures the server's clock offset for claim deadlines
  return coord;
}

RedisCoordinator::RedisCoordinator(const RedisOptions& options,
                                   const coord::RedisConnectionConfig& config,
                                   std::unique_ptr<coord::RedisConnectionPool> conn)
    : options_(options),
      base_(options.prefix + ":" + options.ns),
      conn_(std::move(conn)),
      claims_(std::make_unique<coord::RedisBatcher>(
          kClaimChunk, [this](const auto& items) { return SendClaims(items); })),
      reports_(std::make_unique<coord::RedisBatcher>(
          kReportChunk, [this](const auto& items) { return SendReports(items); })),
      config_(std::make_unique<const coord::RedisConnectionConfig>(config)) {}

RedisCoordinator::~RedisCoordinator() = default;

std::string RedisCoordinator::JobBase(const std::string& job_id) const {
  return base_ + ":{" + job_id + "}";
}

std::vector<std::string> RedisCoordinator::CommonArgs() {
  return {options_.clock_override ? Ms(options_.clock_override->Now()) : std::string(),
          std::to_string(options_.max_records_per_job), std::to_string(options_.max_records_total),
          Ms(options_.fire_retention)};
}

// --- Clock -------------------------------------------------------------------------------------

Result<Instant> RedisCoordinator::Now() {
  if (options_.clock_override) return options_.clock_override->Now();
  Result<RedisReply> r = conn_->Command({"TIME"});
  if (!r.ok()) return r.status();
  int64_t sec = 0, usec = 0;
  if (!IsArray(*r, 2) || !IntAt(*r, 0, sec) || !IntAt(*r, 1, usec)) return Malformed("TIME");
  const Instant server = Instant::FromUnixMillis(sec * 1000 + usec / 1000);
  server_offset_ms_ = (server - SystemClock::Get().Now()).count();
  server_offset_known_ = true;
  return server;
}

std::string RedisCoordinator::ClaimDeadline(Duration lease_ttl) const {
  // The client waits io_timeout for the answer; half a second more covers the offset's error.
  // Never more than half the lease: a claim applied later would reach a holder that already
  // counts most of its lease as gone (it self-fences at ttl - margin after sending the claim).
  const Duration allowance =
      std::min<Duration>(options_.io_timeout + std::chrono::milliseconds(500), lease_ttl / 2);
  if (options_.clock_override) return Ms(options_.clock_override->Now() + allowance);
  if (!server_offset_known_) return "";
  return Ms(SystemClock::Get().Now() + Duration(server_offset_ms_.load()) + allowance);
}

// --- Job state ---------------------------------------------------------------------------------

namespace {

// An HMGET of a job's state fields: paused reason fails last.
JobState JobStateOf(const RedisReply& r) {
  JobState state;
  state.paused = r.elements[0].str == "1";
  state.pause_reason = r.elements[1].str;
  int64_t fails = 0, last = 0;
  if (IntAt(r, 2, fails)) state.consecutive_failures = static_cast<int>(fails);
  if (IntAt(r, 3, last)) state.last_scheduled = Instant::FromUnixMillis(last);
  return state;
}

}  // namespace

Result<JobState> RedisCoordinator::GetJobState(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return JobState{};
  Result<RedisReply> r =
      conn_->Command({"HMGET", JobBase(job_id) + ":state", "paused", "reason", "fails", "last"});
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 4)) return Malformed("job state");
  return JobStateOf(*r);
}

Result<std::vector<JobState>> RedisCoordinator::GetJobStates(
    const std::vector<std::string>& job_ids) {
  constexpr size_t kChunk = 512;
  std::vector<JobState> out;
  out.reserve(job_ids.size());
  for (size_t from = 0; from < job_ids.size(); from += kChunk) {
    scripts::ArgList args(scripts::ArgNames(scripts::kGetJobStates), CommonArgs());
    const size_t to = std::min(job_ids.size(), from + kChunk);
    std::vector<bool> valid;
    for (size_t i = from; i < to; ++i) {
      valid.push_back(IsValidJobId(job_ids[i]));
      if (valid.back()) args.Add("jobs...", job_ids[i]);
    }
    Result<RedisReply> r = conn_->Eval(scripts::kGetJobStates, {base_, base_}, args.Take());
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray) return Malformed("job states");
    size_t k = 0;
    for (bool v : valid) {
      if (!v) {
        out.emplace_back();  // an invalid id has no state, as in GetJobState
        continue;
      }
      if (k >= r->elements.size() || !IsArray(r->elements[k], 4)) return Malformed("job states");
      out.push_back(JobStateOf(r->elements[k++]));
    }
  }
  return out;
}

Status RedisCoordinator::SetPaused(const std::string& job_id, bool paused,
                                   const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kSetPaused), CommonArgs())
          .Add("paused", paused ? "1" : "0")
          .Add("reason", reason)
          .Take();
  Result<RedisReply> r = conn_->Eval(scripts::kSetPaused, {JobBase(job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("set paused");
  return Status::Ok();
}

// --- Nodes -------------------------------------------------------------------------------------

Status RedisCoordinator::Heartbeat(const NodeInfo& node, Duration ttl) {
  if (node.node_id.empty()) return InvalidArgumentError("heartbeat: node_id is empty");
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "heartbeat: ttl"));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {node.node_id, Ms(ttl), EncodeNode(node)});
  Result<RedisReply> r = conn_->Eval(scripts::kHeartbeat, {base_, base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("heartbeat");
  return Status::Ok();
}

Result<std::vector<NodeInfo>> RedisCoordinator::ListNodes() {
  Result<RedisReply> r = conn_->Eval(scripts::kListNodes, {base_, base_}, CommonArgs());
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("list nodes");
  std::vector<NodeInfo> out;
  for (size_t i = 1; i + 1 < r->elements.size(); i += 2) {
    NodeInfo n;
    if (!DecodeNode(r->elements[i].str, r->elements[i + 1].str, n)) return Malformed("list nodes");
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.node_id < b.node_id; });
  return out;
}

// --- Dynamic job definitions -------------------------------------------------------------------

Result<int64_t> RedisCoordinator::PutJob(const std::string& job_id, const std::string& definition,
                                         int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {job_id, definition, std::to_string(expected_version)});
  Result<RedisReply> r = conn_->Eval(scripts::kPutJob, {base_, base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("put job");
  if (Word(*r) == "EXISTS") return AlreadyExistsError("job " + job_id + " already exists");
  if (Word(*r) == "PRECOND") {
    const std::string current = r->elements.size() > 1 ? r->elements[1].str : "";
    if (current.empty()) {
      return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                     std::to_string(expected_version) + ")");
    }
    return FailedPreconditionError("job " + job_id + " is at version " + current + ", not " +
                                   std::to_string(expected_version));
  }
  int64_t version = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, version)) return Malformed("put job");
  return version;
}

Status RedisCoordinator::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  if (!IsValidJobId(job_id))
    return NotFoundError("job " + job_id.substr(0, 128) + " does not exist");
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {job_id, std::to_string(expected_version)});
  Result<RedisReply> r = conn_->Eval(scripts::kDeleteJob, {base_, base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("delete job");
  if (Word(*r) == "NOTFOUND") return NotFoundError("job " + job_id + " does not exist");
  if (Word(*r) == "PRECOND") {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   (r->elements.size() > 1 ? r->elements[1].str : "?") + ", not " +
                                   std::to_string(expected_version));
  }
  if (Word(*r) != "OK") return Malformed("delete job");
  return Status::Ok();
}

Result<StoredJob> RedisCoordinator::GetJob(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return coord::JobNotFound(job_id);
  Result<RedisReply> r = conn_->Command({"HGET", base_ + ":jobs", job_id});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return coord::JobNotFound(job_id);
  if (r->type != RedisReply::Type::kString) return Malformed("get job");
  Result<StoredJob> job = StoredJobOf(job_id, r->str);
  if (!job.ok()) return Malformed("get job");
  return *job;
}

Result<std::vector<StoredJob>> RedisCoordinator::ListJobs() {
  Result<RedisReply> r = conn_->Command({"HGETALL", base_ + ":jobs"});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kArray || r->elements.size() % 2 != 0) {
    return Malformed("list jobs");
  }
  std::vector<StoredJob> out;
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    Result<StoredJob> job = StoredJobOf(r->elements[i].str, r->elements[i + 1].str);
    if (!job.ok()) return Malformed("list jobs");
    out.push_back(std::move(*job));
  }
  std::sort(out.begin(), out.end(),
            [](const StoredJob& a, const StoredJob& b) { return a.job_id < b.job_id; });
  return out;
}

Result<int64_t> RedisCoordinator::JobsVersion() {
  Result<RedisReply> r = conn_->Command({"HGET", base_ + ":meta", "jobs_version"});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return int64_t{0};
  int64_t v = 0;
  if (r->type != RedisReply::Type::kString || !ParseInt(r->str, v))
    return Malformed("jobs version");
  return v;
}

// The subscriber connection is made on first use and kept; while it cannot be had (server down,
// backoff), this falls back to polling, so a waiter never misses a change for long.
Result<int64_t> RedisCoordinator::WaitJobsChange(int64_t since, Duration timeout) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  const std::string channel = base_ + ":events";
  if (subscriber_ == nullptr) {
    Result<std::unique_ptr<coord::RedisConnection>> sub = coord::RedisConnection::Connect(*config_);
    if (!sub.ok()) return Coordinator::WaitJobsChange(since, timeout);
    subscriber_ = std::move(*sub);
  }
  // Subscribed (and pending messages consumed) before the version is read: a change after the
  // read is then a message the wait below receives.
  if (!subscriber_->WaitMessage(channel, Duration(0)).ok()) {
    return Coordinator::WaitJobsChange(since, timeout);
  }
  Result<int64_t> v = JobsVersion();
  if (!v.ok() || *v != since) return v;
  if (!subscriber_->WaitMessage(channel, timeout).ok()) {
    return Coordinator::WaitJobsChange(since, timeout);
  }
  return JobsVersion();
}

// --- Audit log ---------------------------------------------------------------------------------

Result<int64_t> RedisCoordinator::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::string encoded;
  AppendField(encoded, record.who);
  AppendField(encoded, record.action);
  AppendField(encoded, record.target);
  AppendField(encoded, std::to_string(coord::AuditStoredCode(record.result)));
  AppendField(encoded, record.before);
  AppendField(encoded, record.after);
  std::vector<std::string> args = CommonArgs();
  // Failed calls go to their own capped set (B:audit_failed), so they never evict the others.
  args.insert(args.end(),
              {std::to_string(keep), encoded, record.result == AuditResult::kOk ? "ok" : "failed"});
  Result<RedisReply> r = conn_->Eval(scripts::kAppendAudit, {base_, base_}, args);
  if (!r.ok()) return r.status();
  int64_t seq = 0;
  if (!IsArray(*r, 2) || Word(*r) != "OK" || !IntAt(*r, 1, seq)) return Malformed("append audit");
  return seq;
}

Result<std::vector<AuditRecord>> RedisCoordinator::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  const std::string max = before_seq == 0 ? "+inf" : "(" + std::to_string(before_seq);
  std::vector<AuditRecord> out;
  // Both sets, newest first; merged by seq below.
  for (const char* set : {":audit", ":audit_failed"}) {
    Result<RedisReply> r = conn_->Command(
        {"ZREVRANGEBYSCORE", base_ + set, max, "-inf", "LIMIT", "0", std::to_string(*page)});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray) return Malformed("list audit");
    for (const RedisReply& e : r->elements) {
      std::string_view in = e.str;
      AuditRecord a;
      size_t nl1 = in.find('\n');
      size_t nl2 = nl1 == std::string_view::npos ? nl1 : in.find('\n', nl1 + 1);
      int64_t at = 0, status = 0;
      std::string s_status;
      if (nl2 == std::string_view::npos || !ParseInt(in.substr(0, nl1), a.seq) ||
          !ParseInt(in.substr(nl1 + 1, nl2 - nl1 - 1), at)) {
        return Malformed("list audit");
      }
      in.remove_prefix(nl2 + 1);
      if (!ReadField(in, a.who) || !ReadField(in, a.action) || !ReadField(in, a.target) ||
          !ReadField(in, s_status) || !ParseInt(s_status, status) ||
          !ReadField(in, a.before) || !ReadField(in, a.after)) {
        return Malformed("list audit");
      }
      a.at = Instant::FromUnixMillis(at);
      a.result = coord::AuditResultOfStoredCode(status);
      out.push_back(std::move(a));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const AuditRecord& a, const AuditRecord& b) { return a.seq > b.seq; });
  if (out.size() > static_cast<size_t>(*page)) out.resize(static_cast<size_t>(*page));
  return out;
}

}  // namespace gnomon

#include "gnomon/redis_coordinator.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_batcher.h"
#include "src/coord/redis/redis_connection.h"
#include "src/coord/redis/redis_scripts.h"

namespace gnomon {
namespace {

namespace scripts = coord::redis_scripts;
using coord::RedisReply;

// Instants a fire may have: the listing member stores 9e15 - ms in 16 digits.
constexpr int64_t kMaxAbsMillis = 999'999'999'999'999;
constexpr int64_t kInvertBase = 9'000'000'000'000'000;
constexpr int64_t kMaxAttempt = 2147483647;

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool IsValidKeyPart(const std::string& s) { return s.size() <= 64 && IsValidJobId(s); }

std::string Ms(Instant t) { return std::to_string(t.unix_millis()); }
std::string Ms(Duration d) { return std::to_string(d.count()); }

Status ValidateFire(const FireKey& fire) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  const int64_t ms = fire.scheduled_at.unix_millis();
  if (ms > kMaxAbsMillis || ms < -kMaxAbsMillis) {
    return InvalidArgumentError("fire " + fire.RunId() + ": scheduled instant is out of range");
  }
  return Status::Ok();
}

// The listing member of a record position (see redis_scripts.cc: member()).
std::string MemberPrefix(int64_t scheduled_ms, const std::string& job, int shard) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%016lld ", static_cast<long long>(kInvertBase - scheduled_ms));
  std::string out = buf;
  out += job;
  std::snprintf(buf, sizeof(buf), " %010d ", shard);
  out += buf;
  return out;
}
std::string Member(const coord::RunPosition& p) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%010lld", static_cast<long long>(kMaxAttempt - p.attempt));
  return MemberPrefix(p.scheduled_ms, p.job_id, p.shard) + buf;
}

// A reply that is not the shape a script promised: a bug or a foreign key layout.
Status Malformed(const char* what) {
  return InternalError(std::string("redis: unexpected reply to ") + what);
}

// A definition as stored in B:jobs: "<version>\n<definition>". Malformed("job") otherwise.
Result<StoredJob> StoredJobOf(const std::string& job_id, std::string_view stored) {
  const size_t nl = stored.find('\n');
  int64_t version = 0;
  if (nl == std::string_view::npos || !ParseInt(stored.substr(0, nl), version)) {
    return Malformed("job");
  }
  return StoredJob{job_id, std::string(stored.substr(nl + 1)), version};
}

bool IsArray(const RedisReply& r, size_t min_size) {
  return r.type == RedisReply::Type::kArray && r.elements.size() >= min_size;
}
const std::string& Word(const RedisReply& r) { return r.elements[0].str; }

bool IntAt(const RedisReply& r, size_t i, int64_t& out) {
  return i < r.elements.size() && ParseInt(r.elements[i].str, out);
}

// The record stored under `member` (fields from HGETALL).
Result<RunRecord> DecodeRecord(const std::string& member, const RedisReply& fields) {
  // member: "<inv ms> <job> <shard> <inv attempt>"
  size_t a = member.find(' ');
  size_t b = member.find(' ', a + 1);
  size_t c = member.find(' ', b + 1);
  int64_t inv_ms = 0, shard = 0, inv_att = 0;
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos ||
      !ParseInt(std::string_view(member).substr(0, a), inv_ms) ||
      !ParseInt(std::string_view(member).substr(b + 1, c - b - 1), shard) ||
      !ParseInt(std::string_view(member).substr(c + 1), inv_att) ||
      fields.type != RedisReply::Type::kArray) {
    return Malformed("history listing");
  }
  std::map<std::string, const std::string*> f;
  for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    f[fields.elements[i].str] = &fields.elements[i + 1].str;
  }
  auto num = [&](const char* name, int64_t& out) {
    auto it = f.find(name);
    return it != f.end() && ParseInt(*it->second, out);
  };
  auto text = [&](const char* name) {
    auto it = f.find(name);
    return it == f.end() ? std::string() : *it->second;
  };
  int64_t sc = 0, tok = 0, st = 0, fin = 0;
  if (!num("sc", sc) || !num("tok", tok) || !num("st", st) || !num("fin", fin)) {
    return Malformed("history record");
  }
  Result<RunOutcome> outcome = ParseRunOutcome(text("out"));
  if (!outcome.ok()) return Malformed("history record outcome");
  FireKey key;
  key.job_id = member.substr(a + 1, b - a - 1);
  key.scheduled_at = Instant::FromUnixMillis(kInvertBase - inv_ms);
  key.shard = static_cast<int>(shard);
  key.shard_count = static_cast<int>(sc);
  RunRecord r;
  r.run_id = key.RunId();
  r.job_id = key.job_id;
  r.scheduled_at = key.scheduled_at;
  r.shard = key.shard;
  r.shard_count = key.shard_count;
  r.attempt = static_cast<int>(kMaxAttempt - inv_att);
  r.fencing_token = tok;
  r.node_id = text("node");
  r.started_at = Instant::FromUnixMillis(st);
  r.finished_at = Instant::FromUnixMillis(fin);
  r.outcome = *outcome;
  int64_t exit_code = 0;
  if (num("exit", exit_code)) r.exit_code = static_cast<int>(exit_code);
  r.error = text("err");
  r.output = text("output");
  r.skip_reason = text("skip");
  r.params = text("params");
  r.cause = text("cause");
  return r;
}

// Records from an "OK, member, fields, member, fields ..." reply.
Result<std::vector<RunRecord>> DecodeRecords(const RedisReply& reply, const char* what) {
  if (!IsArray(reply, 1) || Word(reply) != "OK" || reply.elements.size() % 2 != 1) {
    return Malformed(what);
  }
  std::vector<RunRecord> out;
  for (size_t i = 1; i + 1 < reply.elements.size(); i += 2) {
    Result<RunRecord> r = DecodeRecord(reply.elements[i].str, reply.elements[i + 1]);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

// NodeInfo <-> "<len>:<bytes>" fields (host, version, started ms, running, skew ms).
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

Status LeaseLost(const gnomon::Claim& claim, const RedisReply& reply) {
  return LeaseLostError(claim.fire.RunId() + " (token " + std::to_string(claim.fencing_token) +
                        "): " + (reply.elements.size() > 1 ? reply.elements[1].str : "fenced"));
}

// ClaimMany and ReportMany: `out` (one answer per request, in order) from script calls of at
// most `chunk` requests. `args(i)` is request i's script arguments, or why it is invalid (then
// its answer, unsent); `send` one call's items; `parse(i, element)` request i's answer from its
// element of the call's reply. A failed call is the answer of each request it carried.
template <typename Answer, typename ArgsFn, typename SendFn, typename ParseFn>
void SendInChunks(std::vector<Answer>& out, size_t chunk, const char* what, ArgsFn args,
                  SendFn send, ParseFn parse) {
  for (size_t from = 0; from < out.size(); from += chunk) {
    const size_t to = std::min(out.size(), from + chunk);
    std::vector<std::vector<std::string>> items;
    std::vector<size_t> sent;
    for (size_t i = from; i < to; ++i) {
      Result<std::vector<std::string>> a = args(i);
      if (!a.ok()) {
        out[i] = a.status();
        continue;
      }
      items.push_back(std::move(*a));
      sent.push_back(i);
    }
    if (sent.empty()) continue;
    std::vector<const std::vector<std::string>*> ptrs;
    for (const std::vector<std::string>& item : items) ptrs.push_back(&item);
    Result<RedisReply> r = send(ptrs);
    for (size_t k = 0; k < sent.size(); ++k) {
      if (!r.ok()) {
        out[sent[k]] = r.status();
      } else if (r->type != RedisReply::Type::kArray || r->elements.size() != sent.size()) {
        out[sent[k]] = Malformed(what);
      } else {
        out[sent[k]] = parse(sent[k], r->elements[k]);
      }
    }
  }
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

// --- Claims and leases -------------------------------------------------------------------------

std::vector<std::string> RedisCoordinator::ClaimArgs(const ClaimRequest& req) const {
  return {req.fire.job_id,
          Ms(req.fire.scheduled_at),
          std::to_string(req.fire.shard),
          std::to_string(req.fire.shard_count),
          req.node_id,
          Ms(req.lease_ttl),
          Ms(req.skew_tolerance),
          std::string(ToString(req.overlap)),
          req.fire.RunId(),
          ClaimDeadline(req.lease_ttl),
          req.cause};
}

namespace {

// One claim_one reply (redis_scripts.cc) as the outcome of `req`.
Result<ClaimOutcome> ParseClaimReply(const ClaimRequest& req, const RedisReply& r) {
  int64_t now = 0;
  if (!IsArray(r, 2) || !IntAt(r, 1, now)) return Malformed("claim");
  using R = ClaimOutcome::Result;
  const std::string& word = Word(r);
  if (word == "LATE") {
    // The command sat in a buffer (a paused or overloaded server) past the client's timeout:
    // refused unapplied, so no claim exists that no node runs (chaos F6).
    return UnavailableError("redis: the claim of " + req.fire.RunId() +
                            " reached the server after the client's deadline; not applied");
  }
  const Instant backend_now = Instant::FromUnixMillis(now);
  if (word == "ALREADY") return coord::MakeOutcome(R::kAlreadyClaimed, backend_now);
  if (word == "EARLY") return coord::MakeOutcome(R::kTooEarly, backend_now);
  if (word == "PAUSED") return coord::MakeOutcome(R::kPaused, backend_now);
  if (word == "OVERLAP") return coord::MakeOutcome(R::kOverlap, backend_now);
  int64_t token = 0, lease = 0;
  if (word != "CLAIMED" || !IntAt(r, 2, token) || !IntAt(r, 3, lease)) {
    return Malformed("claim");
  }
  ClaimOutcome out = coord::MakeOutcome(R::kClaimed, backend_now);
  out.claim =
      gnomon::Claim{req.fire, 1, token, req.node_id, Instant::FromUnixMillis(lease), req.cause};
  for (size_t i = 4; i < r.elements.size(); ++i) {
    // "<ms>:<shard>:<shard_count>"
    const std::string& s = r.elements[i].str;
    size_t c1 = s.find(':', 1);
    size_t c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
    int64_t ms = 0, shard = 0, count = 0;
    if (c2 == std::string::npos || !ParseInt(std::string_view(s).substr(0, c1), ms) ||
        !ParseInt(std::string_view(s).substr(c1 + 1, c2 - c1 - 1), shard) ||
        !ParseInt(std::string_view(s).substr(c2 + 1), count)) {
      return Malformed("claim (replaced fires)");
    }
    FireKey replaced;
    replaced.job_id = req.fire.job_id;
    replaced.scheduled_at = Instant::FromUnixMillis(ms);
    replaced.shard = static_cast<int>(shard);
    replaced.shard_count = static_cast<int>(count);
    out.replaced.push_back(std::move(replaced));
  }
  return out;
}

}  // namespace

Result<ClaimOutcome> RedisCoordinator::Claim(const ClaimRequest& req) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(req));
  GNOMON_RETURN_IF_ERROR(ValidateFire(req.fire));
  Result<RedisReply> r = claims_->Submit(ClaimArgs(req));
  if (!r.ok()) return r.status();
  return ParseClaimReply(req, *r);
}

Result<RedisReply> RedisCoordinator::SendClaims(
    const std::vector<const std::vector<std::string>*>& items) {
  std::vector<std::string> args = CommonArgs();
  args.push_back(std::to_string(items.size()));
  for (const std::vector<std::string>* item : items)
    args.insert(args.end(), item->begin(), item->end());
  return conn_->Eval(scripts::kClaimMany, {base_, base_}, args);
}

Result<RedisReply> RedisCoordinator::SendReports(
    const std::vector<const std::vector<std::string>*>& items) {
  std::vector<std::string> args = CommonArgs();
  args.push_back(std::to_string(items.size()));
  for (const std::vector<std::string>* item : items) {
    args.push_back(std::to_string(item->size()));
    args.insert(args.end(), item->begin(), item->end());
  }
  return conn_->Eval(scripts::kReportMany, {base_, base_}, args);
}

std::vector<Result<ClaimOutcome>> RedisCoordinator::ClaimMany(
    const std::vector<ClaimRequest>& reqs) {
  std::vector<Result<ClaimOutcome>> out(reqs.size(),
                                        Result<ClaimOutcome>(InternalError("redis: not claimed")));
  SendInChunks(
      out, kClaimChunk, "claim batch",
      [&](size_t i) -> Result<std::vector<std::string>> {
        GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(reqs[i]));
        GNOMON_RETURN_IF_ERROR(ValidateFire(reqs[i].fire));
        return ClaimArgs(reqs[i]);
      },
      [&](const auto& items) { return SendClaims(items); },
      [&](size_t i, const RedisReply& e) { return ParseClaimReply(reqs[i], e); });
  return out;
}

Status RedisCoordinator::Renew(gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "renew: ttl"));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(),
              {claim.fire.job_id, Ms(claim.fire.scheduled_at), std::to_string(claim.fire.shard),
               std::to_string(claim.fencing_token), Ms(ttl)});
  Result<RedisReply> r = conn_->Eval(scripts::kRenew, {JobBase(claim.fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("renew");
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  int64_t lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, lease)) return Malformed("renew");
  claim.lease_expires_at = Instant::FromUnixMillis(lease);
  return Status::Ok();
}

Result<gnomon::Claim> RedisCoordinator::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "next attempt: ttl"));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(),
              {claim.fire.job_id, Ms(claim.fire.scheduled_at), std::to_string(claim.fire.shard),
               std::to_string(claim.fencing_token), Ms(ttl), claim.node_id});
  Result<RedisReply> r =
      conn_->Eval(scripts::kNextAttempt, {JobBase(claim.fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("next attempt");
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  int64_t attempt = 0, token = 0, lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("next attempt");
  }
  return gnomon::Claim{claim.fire, static_cast<int>(attempt), token, claim.node_id,
                       Instant::FromUnixMillis(lease)};
}

Result<std::vector<std::string>> RedisCoordinator::ReportArgs(const gnomon::Claim& claim,
                                                              const RunRecord& record,
                                                              bool final) const {
  GNOMON_RETURN_IF_ERROR(coord::ValidateReport(claim, record, final));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  const char* effect = "none";
  if (final) {
    switch (coord::FailureEffectOf(record.outcome)) {
      case coord::FailureEffect::kReset:
        effect = "reset";
        break;
      case coord::FailureEffect::kIncrement:
        effect = "inc";
        break;
      case coord::FailureEffect::kUnchanged:
        break;
    }
  }
  std::vector<std::string> args = {claim.fire.job_id,
                                   Ms(claim.fire.scheduled_at),
                                   std::to_string(claim.fire.shard),
                                   std::to_string(claim.fencing_token),
                                   std::to_string(claim.attempt),
                                   final ? "1" : "0",
                                   effect};
  args.insert(args.end(), {"sc", std::to_string(record.shard_count), "tok",
                           std::to_string(record.fencing_token), "node", record.node_id, "st",
                           Ms(record.started_at), "fin", Ms(record.finished_at), "out",
                           std::string(ToString(record.outcome)), "err", record.error, "output",
                           coord::TruncateOutput(record.output), "skip", record.skip_reason});
  // params only when there are any (most runs have none: fewer bytes for the script).
  if (!record.params.empty()) args.insert(args.end(), {"params", record.params});
  if (!record.cause.empty()) args.insert(args.end(), {"cause", record.cause});
  // exit comes last and only when known: the script removes a stored one otherwise.
  if (record.exit_code) args.insert(args.end(), {"exit", std::to_string(*record.exit_code)});
  return args;
}

Status RedisCoordinator::ParseReportReply(const gnomon::Claim& claim, const RedisReply& r) {
  if (!IsArray(r, 1)) return Malformed("report");
  if (Word(r) == "LEASE") return LeaseLost(claim, r);
  if (Word(r) != "OK") return Malformed("report");
  return Status::Ok();
}

Status RedisCoordinator::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  Result<std::vector<std::string>> args = ReportArgs(claim, record, final);
  if (!args.ok()) return args.status();
  Result<RedisReply> r = reports_->Submit(std::move(*args));
  if (!r.ok()) return r.status();
  return ParseReportReply(claim, *r);
}

std::vector<Status> RedisCoordinator::ReportMany(const std::vector<ReportRequest>& reqs) {
  std::vector<Status> out(reqs.size(), InternalError("redis: not reported"));
  SendInChunks(
      out, kReportChunk, "report batch",
      [&](size_t i) { return ReportArgs(*reqs[i].claim, *reqs[i].record, reqs[i].final); },
      [&](const auto& items) { return SendReports(items); },
      [&](size_t i, const RedisReply& e) { return ParseReportReply(*reqs[i].claim, e); });
  return out;
}

Result<std::vector<ExpiredFire>> RedisCoordinator::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::vector<std::string> args = CommonArgs();
  args.push_back(std::to_string(*page));
  Result<RedisReply> r = conn_->Eval(scripts::kListExpired, {base_, base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK" || (r->elements.size() - 1) % 8 != 0) {
    return Malformed("list expired");
  }
  std::vector<ExpiredFire> out;
  for (size_t i = 1; i + 7 < r->elements.size(); i += 8) {
    int64_t ms = 0, shard = 0, count = 0, attempt = 0, token = 0, lease = 0;
    if (!IntAt(*r, i + 1, ms) || !IntAt(*r, i + 2, shard) || !IntAt(*r, i + 3, count) ||
        !IntAt(*r, i + 4, attempt) || !IntAt(*r, i + 5, token) || !IntAt(*r, i + 7, lease)) {
      return Malformed("list expired");
    }
    ExpiredFire e;
    e.fire.job_id = r->elements[i].str;
    e.fire.scheduled_at = Instant::FromUnixMillis(ms);
    e.fire.shard = static_cast<int>(shard);
    e.fire.shard_count = static_cast<int>(count);
    e.attempt = static_cast<int>(attempt);
    e.fencing_token = token;
    e.node_id = r->elements[i + 6].str;
    e.lease_expired_at = Instant::FromUnixMillis(lease);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::optional<gnomon::Claim>> RedisCoordinator::ResolveLost(const ExpiredFire& expired,
                                                                   const std::string& node_id,
                                                                   LostPolicy policy,
                                                                   Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(expired.fire));
  GNOMON_RETURN_IF_ERROR(coord::ValidateResolveLost(expired, node_id, policy, ttl));
  const FireKey& fire = expired.fire;
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {fire.job_id, Ms(fire.scheduled_at), std::to_string(fire.shard),
                           std::to_string(expired.fencing_token),
                           policy == LostPolicy::kFail ? "fail" : "rerun", node_id,
                           Ms(policy == LostPolicy::kRerun ? ttl : Duration(0))});
  Result<RedisReply> r = conn_->Eval(scripts::kResolveLost, {JobBase(fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("resolve lost");
  if (Word(*r) == "NOTFOUND") return NotFoundError("fire " + fire.RunId() + " has no record");
  if (Word(*r) == "PRECOND") {
    return FailedPreconditionError("fire " + fire.RunId() + " (token " +
                                   std::to_string(expired.fencing_token) +
                                   ") was resolved, renewed or taken over meanwhile");
  }
  if (Word(*r) != "OK") return Malformed("resolve lost");
  if (policy == LostPolicy::kFail) return std::optional<gnomon::Claim>();
  int64_t attempt = 0, token = 0, lease = 0;
  if (!IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("resolve lost");
  }
  return std::optional<gnomon::Claim>(gnomon::Claim{fire, static_cast<int>(attempt), token, node_id,
                                                    Instant::FromUnixMillis(lease)});
}

Status RedisCoordinator::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                       const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(fire));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {fire.job_id, Ms(fire.scheduled_at), std::to_string(fire.shard),
                           std::to_string(fire.shard_count), node_id, reason});
  Result<RedisReply> r = conn_->Eval(scripts::kRecordSkipped, {JobBase(fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("record skipped");
  if (Word(*r) == "EXISTS")
    return AlreadyExistsError("fire " + fire.RunId() + " already has a record");
  if (Word(*r) != "OK") return Malformed("record skipped");
  return Status::Ok();
}

// --- Checkpoints -------------------------------------------------------------------------------

Status RedisCoordinator::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return SaveFenced(scripts::kSaveCheckpoint, claim, value, "save checkpoint");
}

Status RedisCoordinator::SaveFenced(int script, const gnomon::Claim& claim,
                                    const std::string& value, const char* what) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(),
              {claim.fire.job_id, Ms(claim.fire.scheduled_at), std::to_string(claim.fire.shard),
               std::to_string(claim.fencing_token), value});
  Result<RedisReply> r = conn_->Eval(script, {JobBase(claim.fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed(what);
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  if (Word(*r) != "OK") return Malformed(what);
  return Status::Ok();
}

Status RedisCoordinator::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return SaveFenced(scripts::kSaveLiveOutput, claim, coord::TruncateOutput(output),
                    "save live output");
}

Result<std::optional<std::string>> RedisCoordinator::LoadCheckpoint(const FireKey& fire) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(fire));
  Result<RedisReply> r = conn_->Command(
      {"HGET",
       JobBase(fire.job_id) + ":fire:" + Ms(fire.scheduled_at) + ":" + std::to_string(fire.shard),
       "cp"});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return std::optional<std::string>();
  if (r->type != RedisReply::Type::kString) return Malformed("load checkpoint");
  return std::optional<std::string>(std::move(r->str));
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
    std::vector<std::string> args = CommonArgs();
    const size_t to = std::min(job_ids.size(), from + kChunk);
    std::vector<bool> valid;
    for (size_t i = from; i < to; ++i) {
      valid.push_back(IsValidJobId(job_ids[i]));
      if (valid.back()) args.push_back(job_ids[i]);
    }
    Result<RedisReply> r = conn_->Eval(scripts::kGetJobStates, {base_, base_}, args);
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

Status RedisCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {fire.job_id, Ms(fire.scheduled_at), std::to_string(fire.shard), reason});
  Result<RedisReply> r = conn_->Eval(scripts::kCancelFire, {JobBase(fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("cancel");
  if (Word(*r) == "NOTFOUND") return coord::NoSuchFire(fire);
  if (Word(*r) == "PRECOND") return coord::FireEnded(fire);
  if (Word(*r) != "OK") return Malformed("cancel");
  return Status::Ok();
}

Result<gnomon::Claim> RedisCoordinator::RerunFire(const FireKey& fire, const std::string& node_id,
                                                  Duration ttl, const std::string& cause) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateRerun(fire, node_id, ttl, cause));
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {fire.job_id, Ms(fire.scheduled_at), std::to_string(fire.shard), Ms(ttl),
                           node_id, cause});
  Result<RedisReply> r = conn_->Eval(scripts::kRerunFire, {JobBase(fire.job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("rerun");
  if (Word(*r) == "NOTFOUND") return coord::NoSuchFire(fire);
  if (Word(*r) == "PRECOND") return coord::FireNotEnded(fire);
  int64_t attempt = 0, token = 0, lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("rerun");
  }
  return gnomon::Claim{fire,    static_cast<int>(attempt),      token,
                       node_id, Instant::FromUnixMillis(lease), cause};
}

Status RedisCoordinator::SetPaused(const std::string& job_id, bool paused,
                                   const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {paused ? "1" : "0", reason});
  Result<RedisReply> r = conn_->Eval(scripts::kSetPaused, {JobBase(job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("set paused");
  return Status::Ok();
}

// --- History -----------------------------------------------------------------------------------

Result<RunPage> RedisCoordinator::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> page_start = coord::PageStart(query.cursor);
  if (!page_start.ok()) return page_start.status();
  const std::optional<coord::RunPosition> after = *page_start;
  RunPage page;
  if (!query.job_id.empty() && !IsValidJobId(query.job_id)) return page;
  // Start after the cursor, or at the first instant before scheduled_until, whichever is later
  // in listing order (members sort in listing order).
  std::string start = "-";
  if (after) start = "(" + Member(*after);
  if (query.scheduled_until) {
    const int64_t last_ms = query.scheduled_until->unix_millis() - 1;
    if (last_ms < -kMaxAbsMillis) return page;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%016lld",
                  static_cast<long long>(kInvertBase - std::min(last_ms, kMaxAbsMillis)));
    if (start == "-" || std::string_view(start).substr(1) < std::string_view(buf)) {
      start = std::string("[") + buf;
    }
  }
  std::string from;
  if (query.scheduled_from) {
    from = std::to_string(
        std::clamp(query.scheduled_from->unix_millis(), -kMaxAbsMillis - 1, kMaxAbsMillis + 1));
  }
  const std::string index =
      query.job_id.empty() ? base_ + ":runs" : JobBase(query.job_id) + ":runs";
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(),
              {start, query.outcome ? std::string(ToString(*query.outcome)) : std::string(), from,
               std::to_string(*limit + 1)});
  Result<RedisReply> r = conn_->Eval(scripts::kListRuns, {index, base_}, args);
  if (!r.ok()) return r.status();
  Result<std::vector<RunRecord>> runs = DecodeRecords(*r, "list runs");
  if (!runs.ok()) return runs.status();
  page.runs = std::move(*runs);
  if (page.runs.size() > static_cast<size_t>(*limit)) {
    page.runs.resize(*limit);
    page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
  }
  return page;
}

Result<std::vector<RunRecord>> RedisCoordinator::GetRun(const std::string& run_id) {
  auto not_found = [&] { return NotFoundError("run " + run_id.substr(0, 200) + " has no record"); };
  // "<job>@<ms>[#<shard>]"
  size_t at = run_id.rfind('@');
  if (at == std::string::npos) return not_found();
  const std::string job = run_id.substr(0, at);
  std::string_view rest = std::string_view(run_id).substr(at + 1);
  int64_t ms = 0, shard = 0;
  size_t hash = rest.find('#');
  if (!IsValidJobId(job) || !ParseInt(rest.substr(0, hash), ms) || ms > kMaxAbsMillis ||
      ms < -kMaxAbsMillis ||
      (hash != std::string_view::npos &&
       (!ParseInt(rest.substr(hash + 1), shard) || shard < 0 || shard > INT32_MAX))) {
    return not_found();
  }
  std::vector<std::string> args = CommonArgs();
  args.push_back(MemberPrefix(ms, job, static_cast<int>(shard)));
  Result<RedisReply> r = conn_->Eval(scripts::kGetRun, {JobBase(job), base_}, args);
  if (!r.ok()) return r.status();
  Result<std::vector<RunRecord>> runs = DecodeRecords(*r, "get run");
  if (!runs.ok()) return runs.status();
  std::vector<RunRecord> out;
  for (RunRecord& rec : *runs) {
    if (rec.run_id == run_id) out.push_back(std::move(rec));
  }
  if (out.empty()) return not_found();
  std::reverse(out.begin(), out.end());
  return out;
}

Status RedisCoordinator::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  if (!IsValidJobId(job_id)) return InvalidArgumentError("prune: invalid job id");
  std::vector<std::string> args = CommonArgs();
  args.insert(args.end(), {std::to_string(keep_last), Ms(std::min(max_age, kMaxConfigDuration))});
  Result<RedisReply> r = conn_->Eval(scripts::kPrune, {JobBase(job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("prune");
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

// --- Ownership takeover ------------------------------------------------------------------------

Result<std::vector<bool>> RedisCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  std::vector<bool> out;
  out.reserve(fires.size());
  // Bounded script calls: a takeover batch may be large.
  constexpr size_t kBatch = 512;
  for (size_t begin = 0; begin < fires.size(); begin += kBatch) {
    const size_t end = std::min(fires.size(), begin + kBatch);
    std::vector<std::string> args = CommonArgs();
    for (size_t i = begin; i < end; ++i) {
      GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fires[i]));
      args.insert(args.end(),
                  {fires[i].job_id, Ms(fires[i].scheduled_at), std::to_string(fires[i].shard)});
    }
    Result<RedisReply> r = conn_->Eval(scripts::kFiresRecorded, {base_, base_}, args);
    if (!r.ok()) return r.status();
    if (!IsArray(*r, 1) || Word(*r) != "OK" || r->elements.size() != end - begin + 1) {
      return Malformed("fires recorded");
    }
    for (size_t i = 1; i < r->elements.size(); ++i) out.push_back(r->elements[i].integer != 0);
  }
  return out;
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
          !ReadField(in, s_status) || !ParseInt(s_status, status) || !ReadField(in, a.before) ||
          !ReadField(in, a.after)) {
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

// RedisCoordinator's fire and history operations: claims (batched, claim_one), renewals, next
// attempts, reports (batched, report_one), lost fires, skips, checkpoints, live output, cancel,
// rerun, fire markers and the history listing, each one script call whose arguments are built
// against the scripts' one description (redis_scripts.h). The rules themselves run on the
// server, in the Lua of redis_scripts.cc; they are the rules of src/coord/fire_ledger.h.
#include <algorithm>
#include <cstdio>

#include "gnomon/redis_coordinator.h"
#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_batcher.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_connection.h"
#include "src/coord/redis/redis_scripts.h"

namespace gnomon {
namespace {

namespace scripts = coord::redis_scripts;
using coord::RedisReply;
using namespace coord::redis;  // NOLINT(google-build-using-namespace): the backend's codecs

// The arguments of script `id` up to the fire's (job, ms, shard), after `common` (ARGV[1..4]).
scripts::ArgList FireArgs(scripts::Id id, const FireKey& fire, std::vector<std::string> common) {
  scripts::ArgList args(scripts::ArgNames(id), std::move(common));
  args.Add("job", fire.job_id)
      .Add("ms", Ms(fire.scheduled_at))
      .Add("shard", std::to_string(fire.shard));
  return args;
}

// FireArgs of `claim`'s fire, then its token (a fenced script's arguments).
scripts::ArgList FencedArgs(scripts::Id id, const gnomon::Claim& claim,
                            std::vector<std::string> common) {
  scripts::ArgList args = FireArgs(id, claim.fire, std::move(common));
  args.Add("token", std::to_string(claim.fencing_token));
  return args;
}

}  // namespace

// --- Claims and leases -------------------------------------------------------------------------

std::vector<std::string> RedisCoordinator::ClaimArgs(const ClaimRequest& req) const {
  return scripts::ArgList(scripts::kClaimItem)
      .Add("job", req.fire.job_id)
      .Add("ms", Ms(req.fire.scheduled_at))
      .Add("shard", std::to_string(req.fire.shard))
      .Add("shard_count", std::to_string(req.fire.shard_count))
      .Add("node", req.node_id)
      .Add("ttl_ms", Ms(req.lease_ttl))
      .Add("skew_ms", Ms(req.skew_tolerance))
      .Add("overlap", std::string(ToString(req.overlap)))
      .Add("run_id", req.fire.RunId())
      .Add("deadline", ClaimDeadline(req.lease_ttl))
      .Add("cause", req.cause)
      .Take();
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
  scripts::ArgList args(scripts::ArgNames(scripts::kClaimMany), CommonArgs());
  args.Add("n", std::to_string(items.size()));
  for (const std::vector<std::string>* item : items) {
    for (const std::string& arg : *item) args.Add("claims...", arg);
  }
  return conn_->Eval(scripts::kClaimMany, {base_, base_}, args.Take());
}

Result<RedisReply> RedisCoordinator::SendReports(
    const std::vector<const std::vector<std::string>*>& items) {
  scripts::ArgList args(scripts::ArgNames(scripts::kReportMany), CommonArgs());
  args.Add("n", std::to_string(items.size()));
  for (const std::vector<std::string>* item : items) {
    args.Add("reports...", std::to_string(item->size()));
    for (const std::string& arg : *item) args.Add("reports...", arg);
  }
  return conn_->Eval(scripts::kReportMany, {base_, base_}, args.Take());
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
  std::vector<std::string> args =
      FencedArgs(scripts::kRenew, claim, CommonArgs()).Add("ttl_ms", Ms(ttl)).Take();
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
  std::vector<std::string> args = FencedArgs(scripts::kNextAttempt, claim, CommonArgs())
                                      .Add("ttl_ms", Ms(ttl))
                                      .Add("node", claim.node_id)
                                      .Take();
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
  scripts::ArgList args(scripts::kReportItem);
  args.Add("job", claim.fire.job_id)
      .Add("ms", Ms(claim.fire.scheduled_at))
      .Add("shard", std::to_string(claim.fire.shard))
      .Add("token", std::to_string(claim.fencing_token))
      .Add("attempt", std::to_string(claim.attempt))
      .Add("final", final ? "1" : "0")
      .Add("failure_effect", effect);
  auto field = [&](const char* name, std::string value) {
    args.Add("fields...", name).Add("fields...", std::move(value));
  };
  field("sc", std::to_string(record.shard_count));
  field("tok", std::to_string(record.fencing_token));
  field("node", record.node_id);
  field("st", Ms(record.started_at));
  field("fin", Ms(record.finished_at));
  field("out", std::string(ToString(record.outcome)));
  field("err", record.error);
  field("output", coord::TruncateOutput(record.output));
  field("skip", record.skip_reason);
  // params only when there are any (most runs have none: fewer bytes for the script).
  if (!record.params.empty()) field("params", record.params);
  if (!record.cause.empty()) field("cause", record.cause);
  // exit comes last and only when known: the script removes a stored one otherwise.
  if (record.exit_code) field("exit", std::to_string(*record.exit_code));
  return args.Take();
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
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kListExpired), CommonArgs())
          .Add("limit", std::to_string(*page))
          .Take();
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
  std::vector<std::string> args =
      FireArgs(scripts::kResolveLost, fire, CommonArgs())
          .Add("token", std::to_string(expired.fencing_token))
          .Add("policy", policy == LostPolicy::kFail ? "fail" : "rerun")
          .Add("node", node_id)
          .Add("ttl_ms", Ms(policy == LostPolicy::kRerun ? ttl : Duration(0)))
          .Take();
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
  std::vector<std::string> args = FireArgs(scripts::kRecordSkipped, fire, CommonArgs())
                                      .Add("shard_count", std::to_string(fire.shard_count))
                                      .Add("node", node_id)
                                      .Add("reason", reason)
                                      .Take();
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
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(static_cast<scripts::Id>(script)), CommonArgs())
          .Add("ms", Ms(claim.fire.scheduled_at))
          .Add("shard", std::to_string(claim.fire.shard))
          .Add("token", std::to_string(claim.fencing_token))
          .Add("value", value)
          .Take();
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

Status RedisCoordinator::CancelFire(const FireKey& fire, const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::vector<std::string> args =
      FireArgs(scripts::kCancelFire, fire, CommonArgs()).Add("reason", reason).Take();
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
  std::vector<std::string> args = FireArgs(scripts::kRerunFire, fire, CommonArgs())
                                      .Add("ttl_ms", Ms(ttl))
                                      .Add("node", node_id)
                                      .Add("cause", cause)
                                      .Take();
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

// --- Ownership takeover ------------------------------------------------------------------------

Result<std::vector<bool>> RedisCoordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  std::vector<bool> out;
  out.reserve(fires.size());
  // Bounded script calls: a takeover batch may be large.
  constexpr size_t kBatch = 512;
  for (size_t begin = 0; begin < fires.size(); begin += kBatch) {
    const size_t end = std::min(fires.size(), begin + kBatch);
    scripts::ArgList args(scripts::ArgNames(scripts::kFiresRecorded), CommonArgs());
    for (size_t i = begin; i < end; ++i) {
      GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fires[i]));
      args.Add("fires...", fires[i].job_id)
          .Add("fires...", Ms(fires[i].scheduled_at))
          .Add("fires...", std::to_string(fires[i].shard));
    }
    Result<RedisReply> r = conn_->Eval(scripts::kFiresRecorded, {base_, base_}, args.Take());
    if (!r.ok()) return r.status();
    if (!IsArray(*r, 1) || Word(*r) != "OK" || r->elements.size() != end - begin + 1) {
      return Malformed("fires recorded");
    }
    for (size_t i = 1; i < r->elements.size(); ++i) out.push_back(r->elements[i].integer != 0);
  }
  return out;
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
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kListRuns), CommonArgs())
          .Add("start", start)
          .Add("outcome", query.outcome ? std::string(ToString(*query.outcome)) : std::string())
          .Add("from_ms", from)
          .Add("count", std::to_string(*limit + 1))
          .Take();
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
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kGetRun), CommonArgs())
          .Add("member_prefix", MemberPrefix(ms, job, static_cast<int>(shard)))
          .Take();
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
  std::vector<std::string> args = scripts::ArgList(scripts::ArgNames(scripts::kPrune), CommonArgs())
                                      .Add("keep_last", std::to_string(keep_last))
                                      .Add("max_age_ms", Ms(std::min(max_age, kMaxConfigDuration)))
                                      .Take();
  Result<RedisReply> r = conn_->Eval(scripts::kPrune, {JobBase(job_id), base_}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("prune");
  return Status::Ok();
}

}  // namespace gnomon
